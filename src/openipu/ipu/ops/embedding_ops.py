"""`tensorflow.python.ipu.ops.embedding_ops` (also `tensorflow.python.ipu.embedding_ops`)."""

from openipu._src.ops.embedding_ops import (
    embedding_lookup,
)

__all__ = [
    "embedding_lookup",
]
