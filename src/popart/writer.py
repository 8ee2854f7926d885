"""`popart.writer`: the framework-writer base class of the original (re-exports only)."""
# ruff: noqa: F401 - every import here is a re-export

from openipu._src.popart.utility.net_writer import NetWriter
