"""The `openipu` command (`openipu info`, `openipu demo`, `openipu report`)."""

from openipu._src.cli.main import main

__all__ = ["main"]
