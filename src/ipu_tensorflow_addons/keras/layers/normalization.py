"""Group, instance and layer normalization (the same classes as `ipu.keras.layers`')."""

from openipu._src.keras.layers.group_normalization import GroupNorm, GroupNormalization
from openipu._src.keras.layers.instance_normalization import (
    InstanceNorm,
    InstanceNormalization,
)
from openipu._src.keras.layers.layer_normalization import LayerNorm, LayerNormalization

__all__ = [
    "GroupNorm",
    "GroupNormalization",
    "InstanceNorm",
    "InstanceNormalization",
    "LayerNorm",
    "LayerNormalization",
]
