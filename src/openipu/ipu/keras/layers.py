"""`tensorflow.python.ipu.keras.layers`: IPU-specific Keras layers."""

from openipu._src.keras.layers import (
    AssumeEqualAcrossReplicas,
    Dropout,
    Embedding,
    GroupNorm,
    GroupNormalization,
    InstanceNorm,
    InstanceNormalization,
    LayerNorm,
    LayerNormalization,
    RecomputationCheckpoint,
)

__all__ = [
    "AssumeEqualAcrossReplicas",
    "Dropout",
    "Embedding",
    "GroupNorm",
    "GroupNormalization",
    "InstanceNorm",
    "InstanceNormalization",
    "LayerNorm",
    "LayerNormalization",
    "RecomputationCheckpoint",
]
