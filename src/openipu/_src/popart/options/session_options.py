"""`popart.SessionOptions`: every option of the original, with its type and default.

Options that only matter on the hardware (scheduling, outlining, memory placement, Poplar
engine flags) are stored and type-checked, and change nothing on an emulated IPU. The ones
that change what a session computes are read by the session (`session/`); rules across
options are checked when a session is created (`session/option_rules.py`).
"""

from __future__ import annotations

from typing import Any

from openipu._src.popart.logging import python_logger
from openipu._src.popart.options import enums, settings
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
    SetOf,
    TypedOptions,
)

_STR_DICT = DictOf(STR, STR)


def _location_settings() -> Option:
    return Option(InstanceOf(settings.TensorLocationSettings), settings.TensorLocationSettings)


def _flag(default: bool) -> Option:
    return Option(BOOL, default)


_OPTIONS: dict[str, Option] = {
    "accumulateOuterFragmentSettings": Option(
        InstanceOf(settings.AccumulateOuterFragmentSettings),
        settings.AccumulateOuterFragmentSettings,
    ),
    "accumulationAndReplicationReductionType": Option(
        EnumOf(enums.ReductionType), enums.ReductionType.Sum
    ),
    "accumulationFactor": Option(INT, 1),
    "accumulatorTensorLocationSettings": _location_settings(),
    "activationTensorLocationSettings": _location_settings(),
    "optimizerStateTensorLocationSettings": _location_settings(),
    "weightTensorLocationSettings": _location_settings(),
    "aliasZeroCopy": _flag(False),
    "autoRecomputation": Option(
        EnumOf(enums.RecomputationType), enums.RecomputationType.NoRecompute
    ),
    "automaticLossScalingSettings": Option(
        InstanceOf(settings.AutomaticLossScalingSettings), settings.AutomaticLossScalingSettings
    ),
    "batchSerializationSettings": Option(
        InstanceOf(settings.BatchSerializationSettings), settings.BatchSerializationSettings
    ),
    "defaultBufferingDepth": Option(INT, 1),
    "bufferingDepthMap": Option(DictOf(STR, INT), dict),
    "enableEngineCaching": _flag(False),
    "enableVariablesCaching": _flag(True),
    "cachePath": Option(STR, "session_cache"),
    "compileEngine": _flag(True),
    "constantWeights": _flag(True),
    "convolutionOptions": Option(_STR_DICT, dict),
    "createImplicitPipeliningFwdOnlyProgram": _flag(False),
    "customCodeletCompileFlags": Option(STR, ""),
    "customCodelets": Option(ListOf(STR), list),
    "delayVarUpdates": _flag(True),
    "scheduleNonWeightUpdateGradientConsumersEarly": _flag(False),
    "decomposeGradSum": _flag(False),
    "enableConstantFoldingOfMultipleConsumers": _flag(True),
    "disableGradAccumulationTensorStreams": _flag(False),
    "disableOptimizerStateTensorStreams": _flag(False),
    "dotChecks": Option(SetOf(STR), set),
    "dotOpNames": _flag(False),
    "firstDotOp": Option(INT, 0),
    "finalDotOp": Option(INT, 10000),
    "enableDistributedReplicatedGraphs": _flag(False),
    "enableEfficientOverlapIOTopoCons": _flag(False),
    "groupHostSync": _flag(False),
    "useHostCopyOps": _flag(False),
    "useLoopCandidateCreator": _flag(False),
    "stashAllTensorsInferencePipeline": _flag(False),
    "enableExplicitMainLoops": _flag(False),
    "explicitRecomputation": _flag(False),
    "enableFloatingPointChecks": _flag(False),
    "enableMergeExchange": _flag(True),
    "enableFullyConnectedPass": _flag(True),
    "enablePrefetchDatastreams": _flag(True),
    "enableGradientAccumulation": _flag(False),
    "enableInplaceAmbiguityChecking": _flag(False),
    "enableLoadAndOffloadRNGState": _flag(False),
    "enableNonStableSoftmax": _flag(False),
    "enableOutlining": _flag(True),
    "enableOutliningCopyCostPruning": _flag(True),
    "outlineSequenceBreakCost": Option(FLOAT, 10000.0),
    "outlineThreshold": Option(FLOAT, 1.0),
    "enablePipelining": _flag(False),
    "enableReplicatedGraphs": _flag(False),
    "enableStableNorm": _flag(False),
    "enableStochasticRounding": _flag(False),
    "enableSupportedDataTypeCasting": _flag(True),
    "engineOptions": Option(_STR_DICT, dict),
    "ensureFp32LossScaleTensor": _flag(False),
    "executionPhaseSettings": Option(
        InstanceOf(settings.ExecutionPhaseSettings), settings.ExecutionPhaseSettings
    ),
    "experimentalSettings": Option(
        InstanceOf(settings.ExperimentalSettings), settings.ExperimentalSettings
    ),
    "exportPoplarComputationGraph": _flag(False),
    "exportPoplarVertexGraph": _flag(False),
    "gclOptions": Option(_STR_DICT, dict),
    "globalReplicaOffset": Option(INT, 0),
    "globalReplicationFactor": Option(INT, 1),
    "groupNormStridedChannelGrouping": _flag(False),
    "hardwareInstrumentations": Option(
        SetOf(EnumOf(enums.Instrumentation)), lambda: {enums.Instrumentation.Outer}
    ),
    "instrumentWithHardwareCycleCounter": _flag(False),
    "swapLimitScheduler": Option(INT, 1_000_000_000),
    "timeLimitScheduler": Option(FLOAT, 1e9),
    "transitiveClosureOptimizationThreshold": Option(INT, 100_000),
    "kahnTieBreaker": Option(STR, "greedy"),
    "logDir": Option(STR, ""),
    "lstmOptions": Option(_STR_DICT, dict),
    "matmulOptions": Option(_STR_DICT, dict),
    "reportOptions": Option(_STR_DICT, dict),
    "meanAccumulationAndReplicationReductionStrategy": Option(
        EnumOf(enums.MeanReductionStrategy), enums.MeanReductionStrategy.Post
    ),
    "mergeVarUpdate": Option(EnumOf(enums.MergeVarUpdateType), enums.MergeVarUpdateType.Off),
    "mergeVarUpdateMemThreshold": Option(INT, 1_000_000),
    "numIOTiles": Option(INT, 0),
    "opxAliasChecking": _flag(False),
    "opxModifyChecking": _flag(False),
    "partialsTypeMatMuls": Option(STR, ""),
    "rearrangeAnchorsOnHost": _flag(True),
    "rearrangeStreamsOnHost": _flag(False),
    "replicatedCollectivesSettings": Option(
        InstanceOf(settings.ReplicatedCollectivesSettings), settings.ReplicatedCollectivesSettings
    ),
    "replicatedGraphCount": Option(INT, 1),
    "separateCallOpPdfs": _flag(True),
    "serializedPoprithmsAnnealGraphsDir": Option(STR, ""),
    "serializedPoprithmsShiftGraphsDir": Option(STR, ""),
    "strictOpVersions": _flag(True),
    "subgraphCopyingStrategy": Option(
        EnumOf(enums.SubgraphCopyingStrategy), enums.SubgraphCopyingStrategy.OnEnterAndExit
    ),
    "syntheticDataMode": Option(EnumOf(enums.SyntheticDataMode), enums.SyntheticDataMode.Off),
    "tensorLocationSettingsOverride": Option(
        DictOf(STR, InstanceOf(settings.TensorLocation)), dict
    ),
    "throwIfLog2ScaleTensorNotInRange": _flag(True),
    "updatableNamedBuffers": Option(ListOf(STR), list),
    "virtualGraphMode": Option(EnumOf(enums.VirtualGraphMode), enums.VirtualGraphMode.Off),
    "virtualGraphSplitRatios": Option(ListOf(FLOAT), list),
    "_enableRngStateManagement": _flag(False),
}


class SessionOptions(TypedOptions):
    """The options of a session; assign attributes, e.g. `opts.replicatedGraphCount = 2`."""

    OPTIONS = _OPTIONS
    ALIASES = {
        # Deprecated names of the buffering options, and the Python-only spelling.
        "defaultPrefetchBufferingDepth": "defaultBufferingDepth",
        "prefetchBufferingDepthMap": "bufferingDepthMap",
        "updatableBuffers": "updatableNamedBuffers",
    }

    # Setting these warns as the original's binding does (python/popart/popart_core/popart.cpp).
    DEPRECATED = ("defaultPrefetchBufferingDepth", "prefetchBufferingDepthMap")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.DEPRECATED:
            python_logger("session").warning(
                "The session option %s has been deprecated and will be removed in a future "
                "release. Please use the alias %s instead.",
                name,
                self.ALIASES[name],
            )
        super().__setattr__(name, value)

    def enableExplicitIR(self, enable: bool) -> None:  # noqa: N802 - the original's name
        """Sets useHostCopyOps, enableExplicitMainLoops and explicitRecomputation together."""
        enable = BOOL.check(enable, "SessionOptions.enableExplicitIR(enable)")
        self.useHostCopyOps = enable
        self.enableExplicitMainLoops = enable
        self.explicitRecomputation = enable

    def getGlobalReplicationFactor(self) -> int:  # noqa: N802
        if self.enableDistributedReplicatedGraphs:
            return self.globalReplicationFactor
        if self.enableReplicatedGraphs:
            return self.replicatedGraphCount
        return 1

    def getAccumulationFactor(self) -> int:  # noqa: N802 - the C++ accessor, handy in Python
        return self.accumulationFactor if self.enableGradientAccumulation else 1

    def getReplicationFactor(self) -> int:  # noqa: N802
        return self.replicatedGraphCount if self.enableReplicatedGraphs else 1
