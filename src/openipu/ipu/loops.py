"""`tensorflow.python.ipu.loops`: device loops."""

from openipu._src.loops import repeat, while_loop

__all__ = ["repeat", "while_loop"]
