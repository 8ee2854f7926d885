"""Output types of ai.graphcore nodes, which ONNX shape inference does not know.

PopART registers shape inference for its custom operators with ONNX; these
rules play that part so that tensors downstream of, say, a Gelu still get
shapes, and graph outputs get the types the ONNX checker requires. Each rule
registers with the ai.graphcore table (graphcore_ops) and sees the node's
attributes with the table's defaults. A rule may return None for an output it
cannot type; the builder then leaves it untyped.
"""

from __future__ import annotations

from collections.abc import Sequence

from onnx import NodeProto, TensorProto

from openipu._src.popart.builder.attribute_values import attribute_value
from openipu._src.popart.builder.tensor_info import DataType, onnx_type_of
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.graphcore_ops import GRAPHCORE_OPS
from openipu._src.popart.graphcore_ops.reshape_shape import resolved_reshape
from openipu._src.popart.graphcore_ops.scatter_reduce_shape import expanded_indices_shape
from openipu._src.popart.graphcore_ops.shape_rules import TensorType, shape_rule
from openipu._src.popart.graphcore_ops.shape_rules import register_shape_rule as _rule

__all__ = ["TensorType", "infer_graphcore_node"]


def infer_graphcore_node(
    node: NodeProto, input_types: Sequence[TensorType | None]
) -> list[TensorType | None] | None:
    """Output types of an ai.graphcore node, or None when its inputs are not typed yet."""
    rule = shape_rule(node.op_type)
    if rule is None or any(
        t is None for name, t in zip(node.input, input_types, strict=True) if name
    ):
        return None
    given = {attribute.name: attribute_value(attribute) for attribute in node.attribute}
    attributes = GRAPHCORE_OPS[node.op_type].with_defaults(given)
    try:
        return rule(node, input_types, attributes)
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError):
        # A malformed node: leave it to the lowering to report properly.
        return None


def _broadcast(*shapes: tuple[int | None, ...] | None) -> tuple[int | None, ...] | None:
    known_shapes = [shape for shape in shapes if shape is not None]
    if len(known_shapes) < len(shapes):
        return None
    rank = max(len(shape) for shape in known_shapes)
    result: list[int | None] = []
    for axis in range(rank):
        dims = [
            shape[axis - rank + len(shape)]
            for shape in known_shapes
            if axis - rank + len(shape) >= 0
        ]
        known = {dim for dim in dims if dim is not None and dim != 1}
        if len(known) > 1:
            raise ValueError("shapes do not broadcast")
        if known:
            result.append(known.pop())
        elif any(dim is None for dim in dims):
            result.append(None)
        else:
            result.append(1)
    return tuple(result)


def _with_shape(like: TensorType, shape: Sequence[int | None] | None) -> TensorType:
    return TensorType(like.elem_type, None if shape is None else tuple(shape))


def _reduced_loss(like: TensorType, reduction: str, unreduced_shape) -> TensorType:
    return _with_shape(like, unreduced_shape if reduction == "None" else ())


@_rule(
    "Gelu", "GeluErf", "Detach", "Nop", "Scale", "Swish", "Round", "NearbyInt", "Expm1", "Log1p",
    "PrintTensor", "IncrementMod", "ShapedDropout", "TensorRemap", "BitwiseNot", "CopyVarUpdate",
    "DynamicUpdate", "DynamicZero", "DynamicAdd", "ReplicatedAllReduce", "Reverse",
)  # fmt: skip
def _same_as_first_input(node, inputs, attributes):
    return [inputs[0]]


@_rule(
    "Atan2",
    "Fmod",
    "Remainder",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "BitwiseXnor",
    "ScaledAdd",
)
def _broadcast_first_two(node, inputs, attributes):
    return [_with_shape(inputs[0], _broadcast(inputs[0].shape, inputs[1].shape))]


@_rule("Bucketize")
def _bucketize(node, inputs, attributes):
    return [TensorType(TensorProto.INT32, inputs[0].shape)]


@_rule("SequenceSlice")
def _sequence_slice(node, inputs, attributes):
    return [inputs[1]]


def _with_dims(like: TensorType, dims: dict[int, int]) -> TensorType:
    """`like` with the given axes resized; an unknown shape stays unknown."""
    if like.shape is None:
        return like
    shape = list(like.shape)
    for axis, size in dims.items():
        shape[axis] = size
    return _with_shape(like, shape)


@_rule("DynamicSlice")
def _dynamic_slice(node, inputs, attributes):
    if len(inputs) > 2 and inputs[2].shape is not None:
        # A given slice tensor fixes the output's shape (willow/src/op/dynamic/dynamicbase.cpp).
        return [_with_shape(inputs[0], list(inputs[2].shape))]
    sizes = dict(zip(attributes["axes"], attributes["sizes"], strict=True))
    return [_with_dims(inputs[0], sizes)]


@_rule("Reshape")
def _reshape(node, inputs, attributes):
    shape = attributes["shape"]
    if inputs[0].shape is None:
        return [_with_shape(inputs[0], [None if dim in (0, -1) else dim for dim in shape])]
    try:
        return [_with_shape(inputs[0], resolved_reshape(inputs[0].shape, shape))]
    except ValueError:
        # A shape PopART refuses: its session says why (the lowering raises PopART's message);
        # the rank is still known, which keeps the model valid until then.
        return [_with_shape(inputs[0], [None] * len(shape))]


@_rule("Subsample")
def _subsample(node, inputs, attributes):
    # The Builder's shape inference divides rounding down (willow/src/defs.cpp,
    # SubsampleShapeInference) while the IR, like Poplar, rounds up (willow/src/op/subsample.cpp);
    # a session takes the IR's shape from the lowering (session/popart_retyped.py).
    shape = inputs[0].shape
    if shape is None:
        return [inputs[0]]
    strides = list(attributes["strides"]) + [1] * (len(shape) - len(attributes["strides"]))
    return [
        _with_shape(
            inputs[0],
            [None if d is None else d // s for d, s in zip(shape, strides, strict=False)],
        )
    ]


@_rule("Slice")
def _slice(node, inputs, attributes):
    shape = inputs[0].shape
    if shape is None:
        return [inputs[0]]
    sliced = list(shape)
    axes = attributes["axes"] or list(range(len(attributes["starts"])))
    for axis, start, end in zip(axes, attributes["starts"], attributes["ends"], strict=True):
        if sliced[axis] is not None:
            sliced[axis] = len(range(*slice(start, end).indices(sliced[axis])))
    return [_with_shape(inputs[0], sliced)]


@_rule("Sort")
def _sort(node, inputs, attributes):
    return [inputs[0], TensorType(TensorProto.INT32, inputs[0].shape)]


@_rule("ReduceMedian")
def _reduce_median(node, inputs, attributes):
    shape = inputs[0].shape
    if shape is None:
        return [inputs[0], TensorType(TensorProto.INT32, None)]
    rank = len(shape)
    given_axes = attributes["axes"]
    axes = {axis % rank for axis in (range(rank) if given_axes is None else given_axes)}
    keep = attributes["keepdims"]
    reduced = [1 if axis in axes else d for axis, d in enumerate(shape) if keep or axis not in axes]
    return [_with_shape(inputs[0], reduced), TensorType(TensorProto.INT32, tuple(reduced))]


@_rule("Nll")
def _nll(node, inputs, attributes):
    return [_reduced_loss(inputs[0], attributes["reduction"], inputs[1].shape)]


@_rule("L1", "IdentityLoss")
def _elementwise_loss(node, inputs, attributes):
    return [_reduced_loss(inputs[0], attributes["reduction"], inputs[0].shape)]


@_rule("Ctc")
def _ctc(node, inputs, attributes):
    elem_type = inputs[0].elem_type
    if attributes["outDataType"] != "UNDEFINED":
        elem_type = onnx_type_of(attributes["outDataType"])
    shape = inputs[0].shape
    batch = None if shape is None else (shape[1],)
    return [_reduced_loss(TensorType(elem_type, None), attributes["reduction"], batch)]


@_rule("GroupNormalization")
def _group_normalization(node, inputs, attributes):
    shape = inputs[0].shape
    groups = None
    if shape is not None and shape[0] is not None:
        groups = (shape[0] * attributes["num_groups"],)
    statistics = _with_shape(inputs[0], groups)
    return [inputs[0], statistics, statistics][: len(node.output)]


@_rule("BatchNormalization")
def _batch_normalization(node, inputs, attributes):
    return ([inputs[0]] + [inputs[1]] * 4)[: len(node.output)]


@_rule("DepthToSpace")
def _depth_to_space(node, inputs, attributes):
    shape, block = inputs[0].shape, attributes["blocksize"]
    if shape is None or None in shape:
        return [_with_shape(inputs[0], None if shape is None else (None,) * len(shape))]
    batch, channels, height, width = shape
    return [_with_shape(inputs[0], (batch, channels // block**2, height * block, width * block))]


@_rule("Init")
def _init(node, inputs, attributes):
    return [TensorType(onnx_type_of(DataType(attributes["data_type"])), tuple(attributes["shape"]))]


@_rule("LSTM")
def _lstm(node, inputs, attributes):
    data, weights = inputs[0].shape, inputs[1].shape
    if data is None or weights is None:
        return [None, None]
    sequence, batch, hidden = data[0], data[1], weights[2]
    full = attributes["output_full_sequence"]
    output = (sequence, batch, hidden) if full else (batch, hidden)
    return [_with_shape(inputs[0], output), _with_shape(inputs[0], (batch, hidden))]


@_rule("GroupedGather")
def _grouped_gather(node, inputs, attributes):
    # The leading dim is the group, shared by data and indices; each group gathers on its own
    # (willow/src/op/groupedgather.cpp): data dims before the axis, the indices' dims after the
    # group, then the data dims after the axis.
    data, indices = inputs[0].shape, inputs[1].shape
    if data is None or indices is None:
        return [_with_shape(inputs[0], None)]
    axis = max(attributes["axis"] % len(data), 1)
    return [_with_shape(inputs[0], (*data[:axis], *indices[1:], *data[axis + 1 :]))]


@_rule("ScatterReduce", "GroupedScatterReduce")
def _scatter_reduce(node, inputs, attributes):
    # With initial values the output is theirs (willow/src/op/scatterreduce.cpp, setupOutputInfo).
    if len(inputs) > 2 and inputs[2] is not None:
        return [inputs[2]]
    data, indices, axis = inputs[0].shape, inputs[1].shape, attributes["axis"]
    if attributes["enable_index_broadcast"] or data is None or indices is None:
        return [_with_dims(inputs[0], {axis: attributes["axis_size"]})]
    # Without index broadcasting the output follows the indices' shape.
    try:
        shape = expanded_indices_shape(
            indices, data, axis % len(data), node.op_type != "ScatterReduce"
        )
    except popart_exception:
        return [_with_dims(inputs[0], {axis: attributes["axis_size"]})]  # the IR refuses it
    shape[axis] = attributes["axis_size"]
    return [_with_shape(inputs[0], shape)]


@_rule("CtcBeamSearchDecoder")
def _ctc_beam_search_decoder(node, inputs, attributes):
    shape, top = inputs[0].shape, attributes["top_paths"]
    if shape is None:
        return [None, None, None]
    time, batch = shape[0], shape[1]
    return [
        _with_shape(inputs[0], (batch, top)),
        TensorType(TensorProto.INT32, (batch, top)),
        TensorType(TensorProto.INT32, (batch, top, time)),
    ]


@_rule("ReplicatedReduceScatter")
def _replicated_reduce_scatter(node, inputs, attributes):
    # A flat slice of ceil(elements / replicas) elements (willow/src/op/collectives/
    # replicatedreducescatter.cpp); the replica count is the session's, unknown here.
    return [_with_shape(inputs[0], (None,))]


@_rule("NormalizeImage")
def _normalize_image(node, inputs, attributes):
    shape = inputs[0].shape
    return [_with_shape(inputs[0], None if shape is None else tuple(shape[:-1]) + (4,))]


@_rule("SplineWeighting")
def _spline_weighting(node, inputs, attributes):
    features, weights = inputs[0].shape, inputs[1].shape
    if features is None or weights is None:
        return [None]
    return [_with_shape(inputs[0], (features[0], weights[2]))]


@_rule("MultiConv")
def _multi_conv(node, inputs, attributes):
    # Three inputs per convolution (data, weights, bias or ""); the per-convolution window
    # parameters are concatenated, empty for all defaults (willow/src/op/multiconvbase.cpp).
    outputs, offsets = (
        [],
        dict.fromkeys(("pads", "outPads", "strides", "dilations", "inDilations"), 0),
    )
    for conv in range(len(inputs) // 3):
        data, weights = inputs[3 * conv].shape, inputs[3 * conv + 1].shape
        if data is None or weights is None:
            outputs.append(_with_shape(inputs[3 * conv], None))
            continue
        spatial = len(data) - 2

        def take(name: str, count: int, default: int) -> list[int]:
            values = list(attributes[name])
            if not values:
                return [default] * count
            taken = values[offsets[name] : offsets[name] + count]
            offsets[name] += count
            return taken

        pads, out_pads = take("pads", 2 * spatial, 0), take("outPads", 2 * spatial, 0)
        strides, dilations = take("strides", spatial, 1), take("dilations", spatial, 1)
        in_dilations = take("inDilations", spatial, 1)
        shape = [data[0], weights[0]]
        for i in range(spatial):
            size = (data[2 + i] - 1) * in_dilations[i] + 1 + pads[i] + pads[spatial + i]
            size = (size - dilations[i] * (weights[2 + i] - 1) - 1) // strides[i] + 1
            shape.append(size + out_pads[i] + out_pads[spatial + i])
        outputs.append(_with_shape(inputs[3 * conv], shape))
    return outputs
