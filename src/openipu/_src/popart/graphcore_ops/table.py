"""The ai.graphcore operators, declared once.

For each operator: its input and output counts, and its attributes in the order the
builder's `aiGraphcore` method takes them, with their ONNX types and defaults. A default is
the value a node without the attribute means (what the original's op reads then, in
willow/src/op/*.cpp) and the builder method's default for that parameter, unless the
original's method makes the parameter required (Scale's `scale`, Reverse's `dimensions`,
Slice's `axes`, SplineBasis' `degree`). REQUIRED attributes have neither.

The builder writes every attribute (defaults included), the lowering fills in the defaults
of attributes a node does not carry, and shape rules register with the table
(`shape_rules.py`).
"""

from __future__ import annotations

from openipu._src.popart.graphcore_ops.spec import (
    ABSENT,
    FLOAT,
    FLOATS,
    GRAPH,
    INT,
    INTS,
    STRING,
    STRINGS,
    UNBOUNDED,
    OpSpec,
)

# The original's C++ defaults are floats (1e-5f, 0.9f): a default is the value an attribute
# holds, so these are the float32 numbers, not the decimal ones.
_EPSILON = 9.999999747378752e-06  # 1e-5f
_MOMENTUM = 0.8999999761581421  # 0.9f


def _elementwise(op_type: str, inputs: int = 1) -> OpSpec:
    return OpSpec(op_type, (inputs, inputs))


_LOSS_REDUCTION = STRING("reduction", "Mean")  # ReductionType.Mean, as PopART writes it

_OPS = (
    # -- without attributes
    _elementwise("Atan2", 2),
    _elementwise("Fmod", 2),
    _elementwise("Remainder", 2),
    _elementwise("BitwiseAnd", 2),
    _elementwise("BitwiseOr", 2),
    _elementwise("BitwiseXor", 2),
    _elementwise("BitwiseXnor", 2),
    _elementwise("BitwiseNot"),
    _elementwise("Detach"),
    _elementwise("Expm1"),
    _elementwise("Log1p"),
    _elementwise("Gelu"),
    _elementwise("GeluErf"),
    _elementwise("Swish"),
    _elementwise("NearbyInt"),
    _elementwise("Round"),
    _elementwise("Nop"),
    _elementwise("CopyVarUpdate", 2),
    OpSpec("SplineWeighting", (4, 4)),
    # -- element-wise
    # The builder's `scale` is required; a node without it scales by 1 (willow/src/op/scale.cpp).
    OpSpec("Scale", (1, 1), attributes=(FLOAT("scale", 1.0),)),
    OpSpec("ScaledAdd", (2, 4), attributes=(FLOAT("scale0", 1.0), FLOAT("scale1", 1.0))),
    OpSpec("IncrementMod", (1, 1), attributes=(FLOAT("increment"), FLOAT("modulus"))),
    OpSpec("Bucketize", (2, 2), attributes=(INT("right", 0),)),
    # -- shape
    OpSpec("Reshape", (1, 1), attributes=(INTS("shape"),)),
    # Required by the builder; none reverses nothing (willow/src/op/reverse.cpp).
    OpSpec("Reverse", (1, 1), attributes=(INTS("dimensions", ()),)),
    # Required by the builder; no axes means the first len(starts) axes, as in ONNX's
    # Slice-1 (willow/src/op/slice.cpp reads "axes" with the default {}).
    OpSpec("Slice", (1, 1), attributes=(INTS("starts"), INTS("ends"), INTS("axes", ()))),
    OpSpec("Subsample", (1, UNBOUNDED), attributes=(INTS("strides"),)),
    OpSpec("DepthToSpace", (1, 1), attributes=(INT("blocksize"), STRING("mode", "DCR"))),
    OpSpec(
        "Sort",
        (1, 1),
        (2, 2),
        (INT("axis", -1), INT("descending", 0), INT("stable", 0)),
    ),
    OpSpec("ReduceMedian", (1, 1), (2, 2), (INTS("axes", ABSENT), INT("keepdims", 1))),
    # -- dynamic slicing
    OpSpec("DynamicSlice", (2, 3), attributes=(INTS("axes"), INTS("sizes"), INT("noOverlap", 0))),
    OpSpec("DynamicUpdate", (3, 3), attributes=(INTS("axes"), INTS("sizes"), INT("noOverlap", 0))),
    OpSpec("DynamicAdd", (3, 3), attributes=(INTS("axes"), INTS("sizes"))),
    OpSpec("DynamicZero", (2, 2), attributes=(INTS("axes"), INTS("sizes"))),
    OpSpec("SequenceSlice", (5, 5), attributes=(INT("zeroUnused", 0),)),
    # -- gather and scatter (reduction: a ScatterReduction number, Sum)
    OpSpec(
        "ScatterReduce",
        (2, 3),
        attributes=(
            INT("axis_size"),
            INT("axis", -1),
            INT("reduction", 0),
            INT("enable_index_broadcast", 1),
        ),
    ),
    OpSpec(
        "GroupedScatterReduce",
        (2, 3),
        attributes=(
            INT("axis_size"),
            INT("axis", -1),
            INT("reduction", 0),
            INT("group_size", 1),
            INT("enable_index_broadcast", 1),
        ),
    ),
    OpSpec("GroupedGather", (2, 2), attributes=(INT("axis", 0), INT("group_size", 1))),
    # -- normalisation and nn
    OpSpec(
        "GroupNormalization",
        (3, 3),
        (3, 3),
        (INT("num_groups"), FLOAT("epsilon", _EPSILON)),  # willow/src/op/groupnorm.cpp
    ),
    OpSpec(
        "BatchNormalization",
        (5, 5),
        (1, 5),
        # willow/src/op/batchnorm.cpp
        (FLOAT("epsilon", _EPSILON), FLOAT("momentum", _MOMENTUM)),
    ),
    OpSpec("LSTM", (2, 5), (2, 2), (INT("output_full_sequence", 1),)),
    OpSpec("ShapedDropout", (1, 1), attributes=(INTS("shape"), FLOAT("ratio", 0.5))),
    OpSpec("NormalizeImage", (1, 3), attributes=(FLOAT("scale", 1.0),)),
    # Three inputs per convolution ("" for no bias); per-convolution lists concatenated.
    OpSpec(
        "MultiConv",
        (0, UNBOUNDED),
        (1, UNBOUNDED),
        (
            INTS("dilations", ()),
            INTS("inDilations", ()),
            INTS("pads", ()),
            INTS("outPads", ()),
            INTS("strides", ()),
            FLOATS("availableMemoryProportions", ()),
            STRINGS("partialsTypes", ()),
            STRING("planType", ABSENT),
            INT("perConvReservedTiles", ABSENT),
            FLOAT("cycleBackOff", ABSENT),
            INTS("enableConvDithering", ()),
        ),
    ),
    # -- losses
    OpSpec(
        "Nll",
        (2, 2),
        attributes=(_LOSS_REDUCTION, INT("ignoreIndex", ABSENT), INT("inputIsLogProbability", 0)),
    ),
    OpSpec("L1", (1, 1), attributes=(FLOAT("lambda"), _LOSS_REDUCTION)),
    OpSpec("IdentityLoss", (1, 1), attributes=(_LOSS_REDUCTION,)),
    OpSpec(
        "Ctc",
        (4, 4),
        attributes=(
            _LOSS_REDUCTION,
            INT("blank", 0),
            STRING("outDataType", "UNDEFINED"),  # a DataType name; UNDEFINED: the input's
            INT("zeroInfinity", 0),
        ),
    ),
    OpSpec(
        "CtcBeamSearchDecoder",
        (2, 2),
        (3, 3),
        (INT("blank", 0), INT("beam_width", 100), INT("top_paths", 1)),
    ),
    # -- variables, tensors, control
    OpSpec(
        "Init",
        (0, 0),
        attributes=(
            INTS("shape"),
            INT("data_type"),  # a DataType number
            INT("init_type"),  # an InitType number
            INT("batch_axis", -1),
        ),
    ),
    OpSpec(
        "PrintTensor",
        (1, 1),
        attributes=(
            INT("print_gradient", 1),
            STRING("title", ""),
            INT("summariseThreshold", 1000),
            INT("edgeItems", 3),
            INT("maxLineWidth", 75),
            INT("digits", 8),
            INT("floatFormat", 0),
            STRING("separator", " "),
            STRING("openBracket", "["),
            STRING("closeBracket", "]"),
        ),
    ),
    OpSpec("TensorRemap", (1, 1), attributes=(INT("remap_type", 0),)),  # TensorRemapType
    OpSpec("Abort", (0, 1), (0, 0), typed=False),
    # Outputs are the callee's: typed by the subgraph, not by a rule.
    OpSpec("Call", (0, UNBOUNDED), (0, UNBOUNDED), (GRAPH("callee"),), typed=False),
    OpSpec(
        "PackedDataBlock",
        (1, UNBOUNDED),
        attributes=(
            INTS("maxSequenceLengths"),
            INT("resultSize"),
            INT("callbackBatchSize"),
            GRAPH("callback"),
        ),
        typed=False,
    ),
    # -- collectives (their operator and group are annotations, see annotation_names)
    _elementwise("ReplicatedAllReduce"),
    OpSpec("ReplicatedReduceScatter", (1, 1)),
    # -- splines; a node without `degree` has degree 0 (willow/src/op/splinebasis.cpp)
    OpSpec("SplineBasis", (3, 3), (2, 2), (INT("degree", 0),), typed=False),
)

GRAPHCORE_OPS: dict[str, OpSpec] = {spec.op_type: spec for spec in _OPS}


def op_spec(op_type: str) -> OpSpec:
    """The declaration of an ai.graphcore operator; KeyError for an unknown one."""
    return GRAPHCORE_OPS[op_type]
