"""`tensorflow.python.ipu.data.ops.dataset_ops`."""

from openipu._src.data import BufferDataset

__all__ = ["BufferDataset"]
