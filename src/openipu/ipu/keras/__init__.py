"""`tensorflow.python.ipu.keras`: Keras on the IPU (re-exports only)."""

from openipu.ipu.keras import layers

__all__ = ["layers"]
