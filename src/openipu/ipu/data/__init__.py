"""`tensorflow.python.ipu.data`: dataset wrappers."""

from openipu.ipu.data import ops

__all__ = ["ops"]
