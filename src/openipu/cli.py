"""The `openipu` command (`openipu info`, `openipu demo`)."""

from openipu._src.cli.main import main

__all__ = ["main"]
