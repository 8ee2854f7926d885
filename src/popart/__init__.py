"""PopART on emulated IPUs: the public `popart` package (re-exports only).

Imports are grouped by area, one comment header each; add new areas the same way.
"""
# ruff: noqa: F401 - every import here is a re-export

# -- Errors -------------------------------------------------------------------------------
from openipu._src.popart.errors import (
    OutOfMemoryException,
    RecoveryAction,
    popart_exception,
    popart_internal_exception,
    popart_runtime_error,
    poplar_application_runtime_error,
    poplar_exception,
    poplar_recoverable_runtime_error,
    poplar_runtime_error,
    poplar_system_runtime_error,
    poplar_unknown_runtime_error,
    poplar_unrecoverable_runtime_error,
    poplibs_exception,
)

# isort: split
# -- Tensors ------------------------------------------------------------------------------
from openipu._src.popart.builder.tensor_info import DataType, TensorInfo
from popart import tensorinfo

# isort: split
# -- Builder ------------------------------------------------------------------------------
from openipu._src.popart.builder import (
    AiGraphcoreOpset1,
    AiOnnxMlOpset1,
    AiOnnxOpset6,
    AiOnnxOpset7,
    AiOnnxOpset8,
    AiOnnxOpset9,
    AiOnnxOpset10,
    AiOnnxOpset11,
    Builder,
)
from openipu._src.popart.builder.model_context import (
    defaultAiGraphcoreOpset,
    defaultAiOnnxMlOpset,
    defaultAiOnnxOpset,
)
from popart import builder

# isort: split
# -- Builder enums ------------------------------------------------------------------------
from openipu._src.popart.builder.enums import (
    CollectiveOperator,
    CommGroupType,
    InitType,
    RecomputeType,
    ReductionType,
    ScatterReduction,
    TensorRemapType,
)

# isort: split
# -- Sessions -----------------------------------------------------------------------------
from openipu._src.popart.input_shape_info import InputShapeInfo
from openipu._src.popart.session import (
    InferenceSession,
    PyStepIO,
    PyStepIOCallback,
    PyWeightsIO,
    TrainingSession,
)

# isort: split
# -- Optimizers ---------------------------------------------------------------------------
from openipu._src.popart.optimizers import (
    SGD,
    Adam,
    AdamMode,
    Adaptive,
    AdaptiveMode,
    ClipNormSettings,
    ConstSGD,
    Optimizer,
    OptimizerValue,
    OptimizerValueMap,
    SGDAccumulatorAndMomentum,
    WeightDecayMode,
)

# isort: split
# -- Data flow ----------------------------------------------------------------------------
from openipu._src.popart.dataflow import (
    AnchorReturnType,
    AnchorReturnTypeId,
    DataFlow,
    ExchangeStrategy,
    InputSettings,
    ReplicatedStreamMode,
)

# isort: split
# -- Devices ------------------------------------------------------------------------------
from openipu._src.popart.devices import (
    DeviceConnectionType,
    DeviceInfo,
    DeviceManager,
    DeviceSelectionCriterion,
    DeviceType,
    SyncPattern,
)

# isort: split
# -- Session options, their option classes and enums --------------------------------------
from openipu._src.popart.options import SessionOptions
from openipu._src.popart.options.enums import (
    AccumulateOuterFragmentSchedule,
    AutodiffStitchStrategy,
    BatchSerializationBatchSchedule,
    BatchSerializationMethod,
    BatchSerializationTransformContext,
    ExecutionPhaseIOSchedule,
    ExecutionPhaseSchedule,
    GradientTensorTrackingMethod,
    Instrumentation,
    IrSerializationFormat,
    MeanReductionStrategy,
    MergeVarUpdateType,
    RecomputationType,
    ReplicatedTensorSharding,
    SubgraphCopyingStrategy,
    SyntheticDataMode,
    TensorStorage,
    TileSet,
    VariableRetrievalMode,
    VirtualGraphMode,
)
from openipu._src.popart.options.replica_groups import (
    CommGroup,
    ReplicaGrouping,
    VariableSettings,
)
from openipu._src.popart.options.settings import (
    AccumulateOuterFragmentSettings,
    AutodiffSettings,
    AutomaticLossScalingSettings,
    BatchSerializationSettings,
    ExecutionPhaseSettings,
    ExperimentalSettings,
    ReplicatedCollectivesSettings,
    TensorLocation,
    TensorLocationSettings,
)

# isort: split
# -- Utility classes: debug contexts, operator identity, the framework writer ---------------
from openipu._src.popart.utility.debug_context import DebugContext, DebugInfo
from openipu._src.popart.utility.debug_info_stream import (
    closePoplarDebugInfo,
    initializePoplarDebugInfo,
)
from openipu._src.popart.utility.operator_identity import OpDefinition, OperatorIdentifier
from openipu._src.popart.utility.supported_operations import (
    getSupportedOperations,
    getSupportedOperationsDefinition,
    getUnsupportedOperations,
)
from popart import writer

# isort: split
# -- Model transformations ----------------------------------------------------------------
from openipu._src.popart.graph_transformer import GraphTransformer

# isort: split
# -- Patterns -----------------------------------------------------------------------------
from openipu._src.popart.options.patterns import Patterns, PatternsLevel

# isort: split
# -- Logging and reserved tensor names ----------------------------------------------------
from openipu._src.popart.logging import Logger, getLogger
from openipu._src.popart.reserved_names import (  # the optimizer's prefixes
    reservedAccl1Prefix,
    reservedAccl2Prefix,
    reservedAccl3Prefix,
    reservedAcclFinalOutPrefix,
    reservedAcclPrefix,
    reservedAcclToReducePrefix,
    reservedAcclToUpdatePrefix,
    reservedAccumPrefix,
    reservedAdamUpdaterPrefix,
    reservedAutomaticLossScalePrefix,
    reservedConcatInitPrefix,
    reservedCounterPrefix,
    reservedDefaultAdamBeta1Prefix,
    reservedDefaultAdamBeta2Prefix,
    reservedDefaultAdamEpsPrefix,
    reservedDefaultDampeningScaleFactor1Prefix,
    reservedDefaultLearningRatePrefix,
    reservedDefaultLossScalingPrefix,
    reservedDefaultMaxWeightNormPrefix,
    reservedDefaultScaledLearningRate0Prefix,
    reservedDefaultScaledLearningRate1Prefix,
    reservedDefaultScaledMomentum1Prefix,
    reservedDefaultScaledWeightDecay1Prefix,
    reservedDefaultStepPrefix,
    reservedDefaultWeightDecayPrefix,
    reservedDefaultWeightDecayScaleFactor0Prefix,
    reservedFinalReducedGradPrefix,
    reservedGradientPrefix,
    reservedInitPrefix,
    reservedLambR1SqPrefix,
    reservedLambR2SqPrefix,
    reservedLoopCondPrefix,
    reservedLoopIteratorPrefix,
    reservedLossScalingPrefix,
    reservedPrefixes,
    reservedRandomSeedPrefix,
    reservedRemoteArgPrefix,
    reservedRestoredPrefix,
    reservedSeedModifierPrefix,
    reservedSpecificAdamBeta1Prefix,
    reservedSpecificAdamBeta2Prefix,
    reservedSpecificAdamEpsPrefix,
    reservedSpecificDampeningScaleFactor1Prefix,
    reservedSpecificLearningRatePrefix,
    reservedSpecificLossScalingPrefix,
    reservedSpecificMaxWeightNormPrefix,
    reservedSpecificScaledLearningRate0Prefix,
    reservedSpecificScaledLearningRate1Prefix,
    reservedSpecificScaledMomentum1Prefix,
    reservedSpecificScaledWeightDecay1Prefix,
    reservedSpecificStepPrefix,
    reservedSpecificWeightDecayPrefix,
    reservedSpecificWeightDecayScaleFactor0Prefix,
    reservedStashedPrefix,
    reservedStepPrefix,
    reservedUpdatedVarPrefix,
)
from openipu._src.popart.version import packageHash, versionNumber, versionString
