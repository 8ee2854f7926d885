"""`tensorflow.python.ipu.ipu_compiler`: the compiler interface."""

from openipu._src.compiler.ipu_compiler import compile  # noqa: A004

__all__ = ["compile"]
