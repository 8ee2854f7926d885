"""Attributes and inputs the original's op creators and op setups refuse, with its messages.

These are limits of PopART's ops, not of ONNX: the ONNX checker accepts such models, PopART
refuses them when it builds its IR, and its tests match on the texts:
- Clip-11 whose min or max has no data when the IR is built (willow/src/op/clip.cpp,
  clip11OpCreator; operators_test/clip_test.py);
- MaxPool-10 and later with a dilation other than 1 (willow/src/op/maxpool.cpp;
  operators_test/pooling_test.py, test_maxpool10_dilations);
- AveragePool with count_include_pad set (willow/src/op/averagepool.cpp, getSpatialK;
  pooling_test.py, test_average_pool_with_count_include_pad);
- Transpose whose perm does not have one entry per input dimension (willow/src/op/transpose.cpp,
  TransposeBaseOp::setup; operators_test.py, test_transpose_sizes);
- RNN with other than one activation of PopART's, activation parameters, a clip or a
  direction other than forward (willow/src/op/rnn.cpp, rnnOpCreator; operators_test/
  rnn_test.py): checked before ONNX's checks, which would report an empty activations list
  or a bidirectional output shape in their own words.
"""

from __future__ import annotations

from onnx import ModelProto, NodeProto, helper

from openipu._src.popart.errors import popart_exception


def _ints(node: NodeProto, name: str) -> list[int]:
    found = next((a for a in node.attribute if a.name == name), None)
    return [] if found is None else list(found.ints) or ([found.i] if found.i else [])


# The ai.onnx ops `check_op_limits` looks at.
LIMITED_OPS = frozenset({"Clip", "MaxPool", "AveragePool", "Transpose", "RNN"})

# The activation functions PopART's recurrent ops have (willow/src/op/lstmutil.cpp, fromString).
POPART_ACTIVATIONS = frozenset(
    {"Sigmoid", "Relu", "Tanh", "Gelu", "Swish", "Softmax", "SoftmaxStable", "SoftmaxScaled"}
)


def rnn_refusal(node: NodeProto, name: str) -> str | None:
    """Why PopART's RNN refuses the ONNX RNN `node` (called `name` in the message), or None."""
    given = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if "activations" in given:
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in given["activations"]]
        if len(names) != 1:
            return f"{name} only supports 1 activation, {len(names)} were specified"
        if names[0] not in POPART_ACTIVATIONS:
            return f"Activation type '{names[0]}' is not supported for {name}"
    for attribute in ("activation_alpha", "activation_beta", "clip"):
        if attribute in given:
            return f"Attribute `{attribute}' of {name} is not supported"
    direction = given.get("direction", b"forward")
    if (direction.decode() if isinstance(direction, bytes) else direction) != "forward":
        return f"{name} only supports `forward' direction"
    return None


def _dims(values: list) -> str:
    return "[" + " ".join("?" if v is None else str(v) for v in values) + "]"


def _version(opid: str) -> int | None:
    """The version of an op id "domain.Type:version"."""
    _, _, version = opid.rpartition(":")
    return int(version) if version.isdigit() else None


def tensors_without_data(model: ModelProto) -> set[str]:
    """Main-graph tensors the IR cannot know when it is built: streamed inputs, and what
    ops compute from them (constants and weights, and what is folded from them, have data)."""
    graph = model.graph
    unknown = {i.name for i in graph.input} - {t.name for t in graph.initializer}
    for node in graph.node:
        if any(name in unknown for name in node.input if name):
            unknown.update(name for name in node.output if name)
    return unknown


def check_op_limits(
    node: NodeProto,
    opid: str,
    described: str,
    shape: tuple[int | None, ...] | None,
    without_data: set[str],
) -> None:
    """Raise the IR's error if the ai.onnx `node` (of IR id `opid`, named `described` in
    messages, first input of `shape` when known) uses what PopART's op does not support."""
    version = _version(opid)
    # The Builder names a node it was given no name for after its first output (core.py,
    # add_node); the original's op then has an empty name.
    name = "" if node.output and node.name == node.output[0] else node.name
    if node.op_type == "Clip" and version is not None and version >= 11:
        for index, role in ((1, "min"), (2, "max")):
            if index < len(node.input) and node.input[index] in without_data:
                raise popart_exception(
                    f"Op {name}({opid}), inputs=[{node.input[0]}] currently only supports "
                    f"constant min/max parameters. Input '{role}' ({node.input[index]}) has "
                    "no data."
                )
    if node.op_type == "MaxPool" and version is not None and version >= 10:
        dilations = _ints(node, "dilations")
        if any(d != 1 for d in dilations):
            raise popart_exception(
                f"MaxPool has dilations {_dims(dilations)}. Dilations of value other than 1 "
                "are currently not supported."
            )
    if node.op_type == "AveragePool" and _ints(node, "count_include_pad"):
        raise popart_exception("`count_include_pad` is not supported")
    perm = _ints(node, "perm")
    if node.op_type == "Transpose" and perm and shape is not None and len(perm) != len(shape):
        raise popart_exception(
            f"Rank of permutation tensor {_dims(perm)}, rank {len(perm)} must be equal to "
            f"rank of input tensor, shape {_dims(list(shape))}, rank {len(shape)}."
        )
    if node.op_type == "RNN":
        refusal = rnn_refusal(node, described)
        if refusal is not None:
            raise popart_exception(refusal)
