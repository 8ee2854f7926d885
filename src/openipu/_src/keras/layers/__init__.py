"""Keras layers specialised for the IPU (`ipu.keras.layers`), one layer per module."""

from openipu._src.keras.layers.assume_equal_across_replicas import AssumeEqualAcrossReplicas
from openipu._src.keras.layers.dropout import Dropout
from openipu._src.keras.layers.embedding import Embedding
from openipu._src.keras.layers.group_normalization import GroupNorm, GroupNormalization
from openipu._src.keras.layers.instance_normalization import InstanceNorm, InstanceNormalization
from openipu._src.keras.layers.layer_normalization import LayerNorm, LayerNormalization
from openipu._src.keras.layers.recomputation_checkpoint import RecomputationCheckpoint

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
