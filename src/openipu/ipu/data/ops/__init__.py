"""`tensorflow.python.ipu.data.ops`."""

from openipu.ipu.data.ops import dataset_ops

__all__ = ["dataset_ops"]
