"""The option classes that SessionOptions holds (tensor locations, batch serialisation, ...).

None of them changes numbers on an emulated IPU: they are stored, type-checked and kept,
so a program written for the hardware runs unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

from openipu._src.popart.options import enums
from openipu._src.popart.options.replica_groups import CommGroup
from openipu._src.popart.options.typed_fields import (
    BOOL,
    FLOAT,
    INT,
    STR,
    DictOf,
    EnumOf,
    InstanceOf,
    ListOf,
    Option,
    Optional,
    TypedOptions,
)


class TensorLocation(TypedOptions):
    """Where tensors live: `TensorLocation()`, `(storage)`, `(storage, rts)`,
    `(storage, rts, shardingDomain)` or `(storage, loadTileSet, storageTileSet, rts[, domain])`.
    """

    OPTIONS = {
        "storage": Option(EnumOf(enums.TensorStorage), enums.TensorStorage.OnChip),
        "loadTileSet": Option(EnumOf(enums.TileSet), enums.TileSet.Compute),
        "storageTileSet": Option(EnumOf(enums.TileSet), enums.TileSet.Compute),
        "replicatedTensorSharding": Option(
            EnumOf(enums.ReplicatedTensorSharding), enums.ReplicatedTensorSharding.Off
        ),
        "shardingDomain": Option(InstanceOf(CommGroup), CommGroup),
    }

    def __init__(self, *args: Any, **values: Any) -> None:
        # The overloads differ in what follows the storage: tile sets, or the sharding flag.
        if len(args) >= 2 and isinstance(args[1], enums.TileSet):
            names = ["storage", "loadTileSet", "storageTileSet", "replicatedTensorSharding"]
        else:
            names = ["storage", "replicatedTensorSharding"]
        names.append("shardingDomain")
        if len(args) > len(names):
            raise TypeError(f"TensorLocation takes at most {len(names)} arguments here")
        super().__init__(**dict(zip(names, args, strict=False)), **values)


class TensorLocationSettings(TypedOptions):
    """`TensorLocationSettings(location=TensorLocation(), minElementsForOffChip=2,
    minElementsForReplicatedTensorSharding=8192)`; the location may be a TensorStorage."""

    OPTIONS = {
        "location": Option(InstanceOf(TensorLocation), TensorLocation),
        "minElementsForOffChip": Option(INT, 2),
        "minElementsForReplicatedTensorSharding": Option(INT, 8192),
    }

    def __init__(self, *args: Any, **values: Any) -> None:
        if args and isinstance(args[0], enums.TensorStorage):
            args = (TensorLocation(args[0]), *args[1:])
        super().__init__(*args, **values)


class AccumulateOuterFragmentSettings(TypedOptions):
    OPTIONS = {
        "schedule": Option(
            EnumOf(enums.AccumulateOuterFragmentSchedule),
            enums.AccumulateOuterFragmentSchedule.Serial,
        ),
        "excludedVirtualGraphs": Option(ListOf(INT), list),
    }


class AutomaticLossScalingSettings(TypedOptions):
    OPTIONS = {
        "enabled": Option(BOOL, False),
        "toTrackTensors": Option(Optional(ListOf(STR)), None),
        "binEdgeLocation": Option(FLOAT, 0.125),
        "thresholdUpperCountProportion": Option(FLOAT, 1e-7),
        "updatePeriod": Option(INT, 1),
        "gradientTensorTrackingMethod": Option(
            EnumOf(enums.GradientTensorTrackingMethod),
            enums.GradientTensorTrackingMethod.AllNonViewChangingGradientTensors,
        ),
    }


class BatchSerializationSettings(TypedOptions):
    OPTIONS = {
        "factor": Option(INT, 0),
        "concatOnVirtualGraphChange": Option(BOOL, True),
        "concatOnExecutionPhaseChange": Option(BOOL, True),
        "concatOnPipelineStageChange": Option(BOOL, True),
        "transformContext": Option(
            EnumOf(enums.BatchSerializationTransformContext),
            enums.BatchSerializationTransformContext.Fwd,
        ),
        "method": Option(
            EnumOf(enums.BatchSerializationMethod), enums.BatchSerializationMethod.UnrollDynamic
        ),
        "batchSchedule": Option(
            EnumOf(enums.BatchSerializationBatchSchedule),
            enums.BatchSerializationBatchSchedule.Isomorphic,
        ),
    }


class ExecutionPhaseSettings(TypedOptions):
    OPTIONS = {
        "phases": Option(INT, 0),
        "stages": Option(INT, 2),
        "weightIOSchedule": Option(
            EnumOf(enums.ExecutionPhaseIOSchedule), enums.ExecutionPhaseIOSchedule.Preload
        ),
        "activationIOSchedule": Option(
            EnumOf(enums.ExecutionPhaseIOSchedule), enums.ExecutionPhaseIOSchedule.Preload
        ),
        "optimizerStateIOSchedule": Option(
            EnumOf(enums.ExecutionPhaseIOSchedule), enums.ExecutionPhaseIOSchedule.OnDemand
        ),
        "accumulatorIOSchedule": Option(
            EnumOf(enums.ExecutionPhaseIOSchedule), enums.ExecutionPhaseIOSchedule.Preload
        ),
        "schedule": Option(
            EnumOf(enums.ExecutionPhaseSchedule), enums.ExecutionPhaseSchedule.Interleaving
        ),
    }


class ReplicatedCollectivesSettings(TypedOptions):
    OPTIONS = {
        "prepareScheduleForMergingCollectives": Option(BOOL, False),
        "mergeAllReduceCollectives": Option(BOOL, False),
        "mergeReduceScatterCollectives": Option(BOOL, False),
        "mergeAllGatherCollectives": Option(BOOL, False),
    }


class AutodiffSettings(TypedOptions):
    OPTIONS = {
        "stitchStrategy": Option(
            EnumOf(enums.AutodiffStitchStrategy),
            enums.AutodiffStitchStrategy.RecomputeAllNonInputs,
        ),
    }


class ExperimentalSettings(TypedOptions):
    """Experimental settings: the documentation lists no members; the original's binding
    has these two (python/popart/popart_core/popart.cpp, python/popart/__init__.py.in)."""

    OPTIONS: ClassVar[dict[str, Option]] = {
        # Names of custom transforms to run at points of the IR's preparation ("Fwd0", ...);
        # there are no custom transforms here, so they are recorded only.
        "customTransformApplierSettings": Option(DictOf(STR, ListOf(STR)), dict),
        "createHostTransferableTensorWithOffset": Option(BOOL, False),
    }
    ALIASES: ClassVar[dict[str, str]] = {
        "_customTransformApplierSettings": "customTransformApplierSettings"
    }
