"""`popart.tensorinfo`: the TensorInfo module of the original (re-exports only)."""
# ruff: noqa: F401 - every import here is a re-export

from openipu._src.popart.builder.tensor_info import DataType, TensorInfo
