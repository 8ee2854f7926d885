"""`tensorflow.python.ipu.eager`: gradient capture (re-exports only)."""

from openipu.ipu.eager import backprop

__all__ = ["backprop"]
