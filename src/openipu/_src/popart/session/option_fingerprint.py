"""The session options an executable depends on, as a part of its fingerprint.

The original keys its engine cache (and checks `loadExecutable`'s file) with a hash of
the IR that combines the hash of the user's SessionOptions (willow/src/ir.cpp,
`std::hash<popart::IrBundle>`), which covers the options that can change the compiled
program (willow/src/sessionoptions.cpp, `std::hash<popart::SessionOptions>`): those
named here. Others (logging, the cache's own path, reports) leave the entry shared.
"""

from __future__ import annotations

import enum
from typing import Any

#: The options the original's SessionOptions hash combines (those openipu has).
HASHED_OPTIONS = (
    "accumulateOuterFragmentSettings",
    "accumulationAndReplicationReductionType",
    "accumulationFactor",
    "accumulatorTensorLocationSettings",
    "activationTensorLocationSettings",
    "aliasZeroCopy",
    "autoRecomputation",
    "automaticLossScalingSettings",
    "batchSerializationSettings",
    "convolutionOptions",
    "decomposeGradSum",
    "delayVarUpdates",
    "disableGradAccumulationTensorStreams",
    "disableOptimizerStateTensorStreams",
    "enableFloatingPointChecks",
    "enableFullyConnectedPass",
    "enableLoadAndOffloadRNGState",
    "enableNonStableSoftmax",
    "enableOutlining",
    "enableOutliningCopyCostPruning",
    "enablePipelining",
    "enableStableNorm",
    "enableStochasticRounding",
    "enableSupportedDataTypeCasting",
    "engineOptions",
    "ensureFp32LossScaleTensor",
    "executionPhaseSettings",
    "explicitRecomputation",
    "gclOptions",
    "globalReplicationFactor",
    "groupHostSync",
    "groupNormStridedChannelGrouping",
    "kahnTieBreaker",
    "lstmOptions",
    "matmulOptions",
    "meanAccumulationAndReplicationReductionStrategy",
    "mergeVarUpdate",
    "mergeVarUpdateMemThreshold",
    "numIOTiles",
    "optimizerStateTensorLocationSettings",
    "outlineSequenceBreakCost",
    "outlineThreshold",
    "partialsTypeMatMuls",
    "rearrangeAnchorsOnHost",
    "replicatedCollectivesSettings",
    "replicatedGraphCount",
    "scheduleNonWeightUpdateGradientConsumersEarly",
    "subgraphCopyingStrategy",
    "swapLimitScheduler",
    "syntheticDataMode",
    "timeLimitScheduler",
    "virtualGraphMode",
    "weightTensorLocationSettings",
)


def options_fingerprint(options: object) -> dict[str, Any]:
    """The hashed options' values, in a form that is the same in every process."""
    return {name: _plain(getattr(options, name)) for name in HASHED_OPTIONS}


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=repr)
    if hasattr(value, "__dict__"):  # the settings objects: their fields, not their repr
        return {type(value).__name__: {k: _plain(v) for k, v in sorted(vars(value).items())}}
    return repr(value)
