"""`auto_pipeline.utils.types` (re-exports only): the dictionaries of profiles and settings."""

from openipu._src.addons.auto_pipeline.profile_schema import (
    AutoPipelineConfiguration,
    ConnectionInfo,
    CycleInfo,
    IPUClusterInfo,
    LayerInfo,
    MemoryBaseInfo,
    MemoryLayerInfo,
    MemoryRangeInfo,
    ModelInfo,
    RangeInfo,
)

__all__ = [
    "AutoPipelineConfiguration",
    "ConnectionInfo",
    "CycleInfo",
    "IPUClusterInfo",
    "LayerInfo",
    "MemoryBaseInfo",
    "MemoryLayerInfo",
    "MemoryRangeInfo",
    "ModelInfo",
    "RangeInfo",
]
