"""The enums of session options and their option classes, with the original's member names.

Members are numbered in the documentation's order. `ReductionType` and `CommGroupType` are
the builder's enums (the same classes in both places, as in the original).
"""

from __future__ import annotations

import enum

from openipu._src.popart.builder.enums import CommGroupType, ReductionType

__all__ = [
    "AccumulateOuterFragmentSchedule",
    "AutodiffStitchStrategy",
    "BatchSerializationBatchSchedule",
    "BatchSerializationMethod",
    "BatchSerializationTransformContext",
    "CommGroupType",
    "ExecutionPhaseIOSchedule",
    "ExecutionPhaseSchedule",
    "GradientTensorTrackingMethod",
    "Instrumentation",
    "IrSerializationFormat",
    "MeanReductionStrategy",
    "MergeVarUpdateType",
    "RecomputationType",
    "ReductionType",
    "ReplicatedTensorSharding",
    "SubgraphCopyingStrategy",
    "SyntheticDataMode",
    "TensorStorage",
    "TileSet",
    "VariableRetrievalMode",
    "VirtualGraphMode",
]


class AccumulateOuterFragmentSchedule(enum.IntEnum):
    Scheduler = 0
    Serial = 1
    OverlapCycleOptimized = 2
    OverlapMemoryOptimized = 3


class AutodiffStitchStrategy(enum.IntEnum):
    RecomputeMinimal = 0
    RecomputeAllNonInputs = 1
    AddFwdOutputs = 2
    SafeAddFwdOutputs = 3


class BatchSerializationBatchSchedule(enum.IntEnum):
    Scheduler = 0
    Isomorphic = 1
    OverlapOnIo = 2
    OverlapOnCompute = 3


class BatchSerializationMethod(enum.IntEnum):
    UnrollDynamic = 0
    UnrollStatic = 1
    Loop = 2


class BatchSerializationTransformContext(enum.IntEnum):
    Fwd = 0
    Bwd = 1
    # The documentation lists both spellings; they are the same values.
    Forward = 0
    Backward = 1


class ExecutionPhaseIOSchedule(enum.IntEnum):
    Preload = 0
    OnDemand = 1


class ExecutionPhaseSchedule(enum.IntEnum):
    Interleaving = 0
    Batch = 1
    BatchClusteredIO = 2


class GradientTensorTrackingMethod(enum.IntEnum):
    ConvAndMatmulGradients = 0
    AllNonViewChangingGradientTensors = 1
    GradientsOfUserSpecifiedTensors = 2


class Instrumentation(enum.IntEnum):
    Outer = 0
    Inner = 1


class IrSerializationFormat(enum.IntEnum):
    JSON = 0


class MeanReductionStrategy(enum.IntEnum):
    Running = 0
    Post = 1


class MergeVarUpdateType(enum.IntEnum):
    Off = 0  # `None` in C++, which is a keyword in Python
    All = 1
    AutoTight = 2
    AutoLoose = 3


class RecomputationType(enum.IntEnum):
    NoRecompute = 0  # `None` in C++
    Standard = 1
    NormOnly = 2
    RecomputeAll = 3
    Pipeline = 4


class ReplicatedTensorSharding(enum.IntEnum):
    Off = 0
    On = 1


class SubgraphCopyingStrategy(enum.IntEnum):
    OnEnterAndExit = 0
    JustInTime = 1


class SyntheticDataMode(enum.IntEnum):
    Off = 0
    Zeros = 1
    RandomNormal = 2
    RandomUniform = 3


class TensorStorage(enum.IntEnum):
    OnChip = 0
    OffChip = 1


class TileSet(enum.IntEnum):
    Compute = 0
    IO = 1


class VariableRetrievalMode(enum.IntEnum):
    OnePerGroup = 0
    AllReduceReplicas = 1
    AllReplicas = 2


class VirtualGraphMode(enum.IntEnum):
    Off = 0
    Manual = 1
    Auto = 2
    ExecutionPhases = 3
