"""`tensorflow.python.ipu.ops.embedding_ops` (also `tensorflow.python.ipu.embedding_ops`)."""

from openipu._src.ops.embedding_ops import (
    embedding_lookup,
)
from openipu._src.ops.host_embedding.host_embedding import (
    HostEmbedding,
    create_host_embedding,
)
from openipu._src.ops.host_embedding.optimizer_spec import (
    HostEmbeddingOptimizerSpec,
    HostEmbeddingSGDGAOptimizerSpec,
)

__all__ = [
    "HostEmbedding",
    "HostEmbeddingOptimizerSpec",
    "HostEmbeddingSGDGAOptimizerSpec",
    "create_host_embedding",
    "embedding_lookup",
]
