"""SessionOptions: every attribute of the spec with its type and default, checked on assignment.

SPEC_TABLE is transcribed from the fact sheet's section 13.1.3 table (defaults from
sessionoptions.hpp where the documentation gives none).
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

import popart

P = popart

# name, type, default ("settings" rows are option-class instances, checked separately)
SPEC_TABLE = [
    ("accumulateOuterFragmentSettings", "settings", P.AccumulateOuterFragmentSettings),
    ("accumulationAndReplicationReductionType", P.ReductionType, P.ReductionType.Sum),
    ("accumulationFactor", int, 1),
    ("accumulatorTensorLocationSettings", "settings", P.TensorLocationSettings),
    ("activationTensorLocationSettings", "settings", P.TensorLocationSettings),
    ("optimizerStateTensorLocationSettings", "settings", P.TensorLocationSettings),
    ("weightTensorLocationSettings", "settings", P.TensorLocationSettings),
    ("aliasZeroCopy", bool, False),
    ("autoRecomputation", P.RecomputationType, P.RecomputationType.NoRecompute),
    ("automaticLossScalingSettings", "settings", P.AutomaticLossScalingSettings),
    ("batchSerializationSettings", "settings", P.BatchSerializationSettings),
    ("defaultBufferingDepth", int, 1),
    ("bufferingDepthMap", dict, {}),
    ("enableEngineCaching", bool, False),
    ("enableVariablesCaching", bool, True),
    ("cachePath", str, "session_cache"),
    ("compileEngine", bool, True),
    ("constantWeights", bool, True),
    ("convolutionOptions", dict, {}),
    ("createImplicitPipeliningFwdOnlyProgram", bool, False),
    ("customCodeletCompileFlags", str, ""),
    ("customCodelets", list, []),
    ("delayVarUpdates", bool, True),
    ("scheduleNonWeightUpdateGradientConsumersEarly", bool, False),
    ("decomposeGradSum", bool, False),
    ("enableConstantFoldingOfMultipleConsumers", bool, True),
    ("disableGradAccumulationTensorStreams", bool, False),
    ("disableOptimizerStateTensorStreams", bool, False),
    ("dotChecks", set, set()),
    ("dotOpNames", bool, False),
    ("firstDotOp", int, 0),
    ("finalDotOp", int, 10000),
    ("enableDistributedReplicatedGraphs", bool, False),
    ("enableEfficientOverlapIOTopoCons", bool, False),
    ("groupHostSync", bool, False),
    ("useHostCopyOps", bool, False),
    ("useLoopCandidateCreator", bool, False),
    ("stashAllTensorsInferencePipeline", bool, False),
    ("enableExplicitMainLoops", bool, False),
    ("explicitRecomputation", bool, False),
    ("enableFloatingPointChecks", bool, False),
    ("enableMergeExchange", bool, True),
    ("enableFullyConnectedPass", bool, True),
    ("enablePrefetchDatastreams", bool, True),
    ("enableGradientAccumulation", bool, False),
    ("enableInplaceAmbiguityChecking", bool, False),
    ("enableLoadAndOffloadRNGState", bool, False),
    ("enableNonStableSoftmax", bool, False),
    ("enableOutlining", bool, True),
    ("enableOutliningCopyCostPruning", bool, True),
    ("outlineSequenceBreakCost", float, 10000.0),
    ("outlineThreshold", float, 1.0),
    ("enablePipelining", bool, False),
    ("enableReplicatedGraphs", bool, False),
    ("enableStableNorm", bool, False),
    ("enableStochasticRounding", bool, False),
    ("enableSupportedDataTypeCasting", bool, True),
    ("engineOptions", dict, {}),
    ("ensureFp32LossScaleTensor", bool, False),
    ("executionPhaseSettings", "settings", P.ExecutionPhaseSettings),
    ("experimentalSettings", "settings", P.ExperimentalSettings),
    ("exportPoplarComputationGraph", bool, False),
    ("exportPoplarVertexGraph", bool, False),
    ("gclOptions", dict, {}),
    ("globalReplicaOffset", int, 0),
    ("globalReplicationFactor", int, 1),
    ("groupNormStridedChannelGrouping", bool, False),
    ("hardwareInstrumentations", set, {P.Instrumentation.Outer}),
    ("instrumentWithHardwareCycleCounter", bool, False),
    ("swapLimitScheduler", int, 1_000_000_000),
    ("timeLimitScheduler", float, 1e9),
    ("transitiveClosureOptimizationThreshold", int, 100_000),
    ("kahnTieBreaker", str, "greedy"),
    ("logDir", str, ""),
    ("lstmOptions", dict, {}),
    ("matmulOptions", dict, {}),
    ("reportOptions", dict, {}),
    (
        "meanAccumulationAndReplicationReductionStrategy",
        P.MeanReductionStrategy,
        P.MeanReductionStrategy.Post,
    ),
    ("mergeVarUpdate", P.MergeVarUpdateType, P.MergeVarUpdateType.Off),
    ("mergeVarUpdateMemThreshold", int, 1_000_000),
    ("numIOTiles", int, 0),
    ("opxAliasChecking", bool, False),
    ("opxModifyChecking", bool, False),
    ("partialsTypeMatMuls", str, ""),
    ("rearrangeAnchorsOnHost", bool, True),
    ("rearrangeStreamsOnHost", bool, False),
    ("replicatedCollectivesSettings", "settings", P.ReplicatedCollectivesSettings),
    ("replicatedGraphCount", int, 1),
    ("separateCallOpPdfs", bool, True),
    ("serializedPoprithmsAnnealGraphsDir", str, ""),
    ("serializedPoprithmsShiftGraphsDir", str, ""),
    ("strictOpVersions", bool, True),
    (
        "subgraphCopyingStrategy",
        P.SubgraphCopyingStrategy,
        P.SubgraphCopyingStrategy.OnEnterAndExit,
    ),
    ("syntheticDataMode", P.SyntheticDataMode, P.SyntheticDataMode.Off),
    ("tensorLocationSettingsOverride", dict, {}),
    ("throwIfLog2ScaleTensorNotInRange", bool, True),
    ("updatableNamedBuffers", list, []),
    ("virtualGraphMode", P.VirtualGraphMode, P.VirtualGraphMode.Off),
    ("virtualGraphSplitRatios", list, []),
    ("_enableRngStateManagement", bool, False),
]

# A value of the wrong type for each kind of option.
WRONG_VALUE = {
    bool: "1",
    int: "1",
    float: "1.0",
    str: 3,
    dict: [("a", "b")],
    list: "abc",
    set: "abc",
    "settings": object(),
}


def test_the_table_covers_every_option():
    assert {name for name, _, _ in SPEC_TABLE} == set(popart.SessionOptions.OPTIONS)


@pytest.mark.parametrize("name, kind, default", SPEC_TABLE, ids=[row[0] for row in SPEC_TABLE])
def test_default(name, kind, default):
    value = getattr(popart.SessionOptions(), name)
    if kind == "settings":
        assert isinstance(value, default) and value == default()
    else:
        assert value == default
        if kind in (bool, int, float, str):
            assert type(value) is kind


@pytest.mark.parametrize("name, kind, default", SPEC_TABLE, ids=[row[0] for row in SPEC_TABLE])
def test_wrong_type_names_the_option_the_value_and_the_type(name, kind, default):
    options = popart.SessionOptions()
    wrong = WRONG_VALUE.get(kind, 3.5)  # enums: a float is never a member
    message = rf"SessionOptions\.{name} must be .*, got {re.escape(repr(wrong))}"
    with pytest.raises(TypeError, match=message):
        setattr(options, name, wrong)
    with pytest.raises(popart.popart_exception):
        setattr(options, name, wrong)


def test_numbers_convert_as_the_original_bindings_convert_them():
    # The options are def_readwrite members: pybind11 2.6's setters convert a bool from
    # None and from anything with __bool__ (numbers, NumPy scalars), an int from a bool, a
    # float from an int or a bool (pybind11/cast.h type_caster<bool>, type_caster<T>).
    options = popart.SessionOptions()
    for value, expected in [(1, True), (0, False), (None, False), (np.bool_(True), True)]:
        options.enableOutlining = value
        assert options.enableOutlining is expected
    options.replicatedGraphCount = True
    assert options.replicatedGraphCount == 1 and type(options.replicatedGraphCount) is int
    options.outlineThreshold = np.int64(3)
    assert options.outlineThreshold == 3.0 and type(options.outlineThreshold) is float
    with pytest.raises(TypeError, match="replicatedGraphCount must be int, got 2.5"):
        options.replicatedGraphCount = 2.5


def test_assignments_of_the_right_type():
    options = popart.SessionOptions()
    options.accumulationFactor = 4
    options.outlineThreshold = 2  # ints are floats
    options.customCodelets = ("a.cpp", "b.cpp")
    options.dotChecks = ["Fwd0"]
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.accumulationAndReplicationReductionType = popart.ReductionType.Mean
    options.tensorLocationSettingsOverride = {
        "w": popart.TensorLocation(popart.TensorStorage.OffChip)
    }
    assert options.accumulationFactor == 4 and options.outlineThreshold == 2.0
    assert options.customCodelets == ["a.cpp", "b.cpp"] and options.dotChecks == {"Fwd0"}
    with pytest.raises(TypeError, match="bool"):
        options.enableOutlining = "yes"
    with pytest.raises(TypeError, match=r"customCodelets\[1\] must be str"):
        options.customCodelets = ["a", 1]


def test_dict_options_write_back_and_are_checked():
    options = popart.SessionOptions()
    options.engineOptions["debug.instrument"] = "true"
    assert options.engineOptions == {"debug.instrument": "true"}
    with pytest.raises(TypeError, match=r"engineOptions\['x'\] must be str, got 1"):
        options.engineOptions["x"] = 1
    options.bufferingDepthMap.update({"x": 2})
    assert options.bufferingDepthMap == {"x": 2}


def test_unknown_options_and_aliases():
    options = popart.SessionOptions()
    with pytest.raises(
        AttributeError, match="no option 'enableOutlinning'; did you mean 'enableOutlining'"
    ):
        options.enableOutlinning = True
    with pytest.raises(AttributeError, match="no option 'nothing'"):
        options.nothing  # noqa: B018
    options.defaultPrefetchBufferingDepth = 3
    assert options.defaultBufferingDepth == 3 and options.defaultPrefetchBufferingDepth == 3
    options.updatableBuffers = ["w"]
    assert options.updatableNamedBuffers == ["w"]


def test_explicit_ir_and_factors():
    options = popart.SessionOptions()
    options.enableExplicitIR(True)
    assert (
        options.useHostCopyOps and options.enableExplicitMainLoops and options.explicitRecomputation
    )
    assert options.getGlobalReplicationFactor() == 1
    options.replicatedGraphCount = 4
    assert options.getGlobalReplicationFactor() == 1
    options.enableReplicatedGraphs = True
    assert options.getGlobalReplicationFactor() == 4
    options.enableDistributedReplicatedGraphs = True
    options.globalReplicationFactor = 8
    assert options.getGlobalReplicationFactor() == 8


def test_validate_catches_in_place_changes_to_lists():
    options = popart.SessionOptions()
    options.customCodelets.append(3)
    with pytest.raises(TypeError, match=r"customCodelets\[0\]"):
        options.validate()


def test_options_copy_and_compare():
    options = popart.SessionOptions()
    options.engineOptions["a"] = "b"
    copied = copy.deepcopy(options)
    assert copied == options and copied.engineOptions is not options.engineOptions
    copied.engineOptions["c"] = "d"
    assert copied != options
    assert "engineOptions" in repr(options)


# -- option classes ---------------------------------------------------------------------------


def test_option_class_defaults():
    location = popart.TensorLocationSettings()
    assert location.location.storage is popart.TensorStorage.OnChip
    assert (location.minElementsForOffChip, location.minElementsForReplicatedTensorSharding) == (
        2,
        8192,
    )
    loss_scaling = popart.AutomaticLossScalingSettings()
    assert not loss_scaling.enabled and loss_scaling.toTrackTensors is None
    assert (
        loss_scaling.binEdgeLocation == 0.125 and loss_scaling.thresholdUpperCountProportion == 1e-7
    )
    assert loss_scaling.updatePeriod == 1
    assert (
        loss_scaling.gradientTensorTrackingMethod
        is popart.GradientTensorTrackingMethod.AllNonViewChangingGradientTensors
    )
    batch = popart.BatchSerializationSettings()
    assert (
        batch.factor == 0 and batch.concatOnVirtualGraphChange and batch.concatOnPipelineStageChange
    )
    assert batch.method is popart.BatchSerializationMethod.UnrollDynamic
    assert batch.transformContext is popart.BatchSerializationTransformContext.Fwd
    assert batch.batchSchedule is popart.BatchSerializationBatchSchedule.Isomorphic
    phases = popart.ExecutionPhaseSettings()
    assert (phases.phases, phases.stages) == (0, 2)
    assert phases.weightIOSchedule is popart.ExecutionPhaseIOSchedule.Preload
    assert phases.optimizerStateIOSchedule is popart.ExecutionPhaseIOSchedule.OnDemand
    assert phases.schedule is popart.ExecutionPhaseSchedule.Interleaving
    fragment = popart.AccumulateOuterFragmentSettings()
    assert fragment.schedule is popart.AccumulateOuterFragmentSchedule.Serial
    assert fragment.excludedVirtualGraphs == []
    collectives = popart.ReplicatedCollectivesSettings()
    assert not any(collectives.option_values().values())
    assert (
        popart.BatchSerializationTransformContext.Forward
        is popart.BatchSerializationTransformContext.Fwd
    )


def test_option_class_constructors_and_checks():
    settings = popart.BatchSerializationSettings(4, False)
    assert settings.factor == 4 and not settings.concatOnVirtualGraphChange
    with pytest.raises(TypeError, match=r"BatchSerializationSettings\.factor must be int"):
        popart.BatchSerializationSettings("4")
    location = popart.TensorLocation(
        popart.TensorStorage.OffChip, popart.TileSet.IO, popart.TileSet.Compute,
        popart.ReplicatedTensorSharding.On,
    )  # fmt: skip
    assert location.loadTileSet is popart.TileSet.IO
    assert location.replicatedTensorSharding is popart.ReplicatedTensorSharding.On
    sharded = popart.TensorLocation(popart.TensorStorage.OnChip, popart.ReplicatedTensorSharding.On)
    assert sharded.replicatedTensorSharding is popart.ReplicatedTensorSharding.On
    with_storage = popart.TensorLocationSettings(popart.TensorStorage.OffChip, 5)
    assert with_storage.location.storage is popart.TensorStorage.OffChip
    assert with_storage.minElementsForOffChip == 5
    options = popart.SessionOptions()
    options.weightTensorLocationSettings = with_storage
    with_storage.minElementsForOffChip = 9  # the option holds a copy, as pybind11 does
    assert options.weightTensorLocationSettings.minElementsForOffChip == 5
    with pytest.raises(
        TypeError, match="weightTensorLocationSettings must be TensorLocationSettings"
    ):
        options.weightTensorLocationSettings = popart.TensorLocation()


def test_comm_groups_and_variable_settings():
    consecutive = popart.CommGroup(popart.CommGroupType.Consecutive, 2)
    grouping = consecutive.toReplicaGrouping(8)
    assert grouping.getNumGroups() == 4 and grouping.getReplicasAt(1) == [2, 3]
    orthogonal = popart.CommGroup(popart.CommGroupType.Orthogonal, 2).toReplicaGrouping(8)
    assert orthogonal.getStride() == 4 and orthogonal.getReplicasAt(1) == [1, 5]
    assert orthogonal.getGroupAt(5) == 1 and orthogonal.getIndexInGroupAt(5) == 1
    settings = popart.VariableSettings(consecutive, popart.VariableRetrievalMode.OnePerGroup)
    assert settings.getGroupCount(8) == 4 and settings.groups(4) == [[0, 1], [2, 3]]
    assert settings.shapeOnHost([3], 8) == [4, 3] and settings.shapeOnReplica([4, 3], 8, "w") == [3]
    assert settings.getGroupRepresentative(2) == 4
    every = popart.VariableSettings(popart.VariableRetrievalMode.AllReplicas)
    assert every.numReplicasReturningVariable(4) == 4 and every.getGroupCount(4) == 1
    with pytest.raises(popart.popart_exception, match="divide the 8 replicas"):
        popart.CommGroup(popart.CommGroupType.Consecutive, 3).toReplicaGrouping(8)
    # The original's verify accepts every retrieval mode (willow/src/variablesettings.cpp).
    popart.VariableSettings(popart.VariableRetrievalMode.AllReduceReplicas).verify()
