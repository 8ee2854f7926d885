"""The ai.graphcore op table: every op has a builder method, a lowering and a shape rule, and
what the builder writes reads back through the lowering with the table's defaults."""

from __future__ import annotations

import inspect

import numpy as np
import onnx
import pytest

import popart
from openipu._src.popart.builder import AiGraphcore
from openipu._src.popart.builder.opsets.base import Opset
from openipu._src.popart.graphcore_ops import ABSENT, GRAPHCORE_OPS, REQUIRED
from openipu._src.popart.graphcore_ops.shape_rules import shape_rule
from openipu._src.popart.lowering.graph import Lowerer
from openipu._src.popart.lowering.op import decode_attribute
from openipu._src.popart.lowering.registry import GRAPHCORE_DOMAIN, registered_ops

# Builder methods not named after their op type in lower case.
METHODS = {
    "Nll": "nllloss",
    "L1": "l1loss",
    "Ctc": "ctcloss",
    "NormalizeImage": "normalize_image",
    "PackedDataBlock": "packedDataBlock",
}


def _method(op_type: str) -> str:
    return METHODS.get(op_type, op_type.lower())


def test_every_op_has_a_builder_method_a_lowering_and_a_shape_rule():
    lowered = {op_type for domain, op_type in registered_ops() if domain == GRAPHCORE_DOMAIN}
    for op_type, spec in GRAPHCORE_OPS.items():
        assert (spec.domain, spec.version) == ("ai.graphcore", 1)
        assert callable(getattr(AiGraphcore, _method(op_type), None)), op_type
        assert (op_type in lowered) == spec.lowered, op_type
        assert (shape_rule(op_type) is not None) == spec.typed, op_type
        assert 0 <= spec.inputs[0] <= spec.inputs[1] and 0 <= spec.outputs[0] <= spec.outputs[1]
    # ... and nothing outside the table
    assert lowered <= set(GRAPHCORE_OPS)
    methods = {
        name
        for name in vars(AiGraphcore)
        if not name.startswith("_") and callable(getattr(AiGraphcore, name))
    } - set(vars(Opset))
    assert methods == {_method(op_type) for op_type in GRAPHCORE_OPS}


def _subgraph(builder):
    subgraph = builder.createSubgraphBuilder()
    data = subgraph.addInputTensor("FLOAT", [3])
    subgraph.addOutputTensor(subgraph.aiOnnx.relu([data]))
    return subgraph


# op type -> builder, inputs -> the method's call with only its required parameters
CALLS = {
    "Scale": lambda b, x: b.aiGraphcore.scale(x, 2.0),
    "IncrementMod": lambda b, x: b.aiGraphcore.incrementmod(x, 1.0, 4.0),
    "Reshape": lambda b, x: b.aiGraphcore.reshape(x[0], [3]),
    "Reverse": lambda b, x: b.aiGraphcore.reverse(x, [0]),
    "Slice": lambda b, x: b.aiGraphcore.slice(x, [2], [0], [0]),
    "Subsample": lambda b, x: b.aiGraphcore.subsample(x, [2]),
    "DepthToSpace": lambda b, x: b.aiGraphcore.depthtospace(x, 2),
    "DynamicSlice": lambda b, x: b.aiGraphcore.dynamicslice(x, [0], [1]),
    "DynamicUpdate": lambda b, x: b.aiGraphcore.dynamicupdate(x, [0], [1]),
    "DynamicAdd": lambda b, x: b.aiGraphcore.dynamicadd(x, [0], [1]),
    "DynamicZero": lambda b, x: b.aiGraphcore.dynamiczero(x, [0], [1]),
    "ScatterReduce": lambda b, x: b.aiGraphcore.scatterreduce(x, 3),
    "GroupedScatterReduce": lambda b, x: b.aiGraphcore.groupedscatterreduce(x, 3),
    "GroupNormalization": lambda b, x: b.aiGraphcore.groupnormalization(x, 1),
    "BatchNormalization": lambda b, x: b.aiGraphcore.batchnormalization(x, 1),
    "ShapedDropout": lambda b, x: b.aiGraphcore.shapeddropout(x, [3]),
    "MultiConv": lambda b, x: b.aiGraphcore.multiconv([x]),
    "L1": lambda b, x: b.aiGraphcore.l1loss(x, 0.5),
    "Init": lambda b, x: b.aiGraphcore.init([3], popart.DataType.FLOAT, popart.InitType.Zero),
    "Call": lambda b, x: b.aiGraphcore.call(x, 1, _subgraph(b)),
    "PackedDataBlock": lambda b, x: b.aiGraphcore.packedDataBlock(x, [3], 3, 1, _subgraph(b)),
    "SplineBasis": lambda b, x: b.aiGraphcore.splinebasis(x, 1),
    # the original's copyvarupdate takes an initialised tensor first
    "CopyVarUpdate": lambda b, x: b.aiGraphcore.copyvarupdate(
        [b.addInitializedInputTensor(np.zeros(3, np.float32)), x[0]]
    ),
}


# Attributes with a default that the builder's method nevertheless requires (see table.py).
BUILDER_REQUIRES = {
    ("Scale", "scale"),
    ("Reverse", "dimensions"),
    ("Slice", "axes"),
    ("SplineBasis", "degree"),
}


def _written_node(op_type: str) -> onnx.NodeProto:
    spec = GRAPHCORE_OPS[op_type]
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    count = {"MultiConv": 2, "Call": 1}.get(op_type, spec.inputs[0])
    inputs = [builder.addInputTensor("FLOAT", [3]) for _ in range(count)]
    call = CALLS.get(op_type)
    if call is not None:
        call(builder, inputs)
    else:
        getattr(builder.aiGraphcore, _method(op_type))(inputs)
    node = builder._impl._graph.node[-1]
    assert (node.op_type, node.domain) == (op_type, "ai.graphcore")
    # Without the builder's debug info id (every node has one; test_builder_test.py).
    own = [a for a in node.attribute if a.name != "__debug_info_id"]
    assert len(own) == len(node.attribute) - 1
    del node.attribute[:]
    node.attribute.extend(own)
    return node


@pytest.mark.parametrize("op_type", sorted(GRAPHCORE_OPS))
def test_builder_writes_every_attribute_with_the_table_types_and_defaults(op_type):
    spec = GRAPHCORE_OPS[op_type]
    node = _written_node(op_type)
    written = {attribute.name: attribute for attribute in node.attribute}
    assert set(written) <= {attribute.name for attribute in spec.attributes}
    for attribute in spec.attributes:
        if attribute.default is ABSENT:
            assert attribute.name not in written, attribute.name
            continue
        assert written[attribute.name].type == attribute.type, attribute.name
        if attribute.default is not REQUIRED and (op_type, attribute.name) not in BUILDER_REQUIRES:
            # Called with only the required parameters: the rest are the table's defaults.
            assert decode_attribute(written[attribute.name]) == spec.default(attribute.name)


@pytest.mark.parametrize(
    "op_type", sorted(op for op, spec in GRAPHCORE_OPS.items() if spec.lowered)
)
def test_builder_attributes_round_trip_through_the_lowering(op_type):
    spec = GRAPHCORE_OPS[op_type]
    node = _written_node(op_type)
    lowerer = Lowerer({"": 11, "ai.graphcore": 1})
    attrs = lowerer.lower_node(node).attrs
    for attribute in node.attribute:
        if attribute.type != onnx.AttributeProto.GRAPH:
            assert attrs[attribute.name] == decode_attribute(attribute), attribute.name
    # Without the attributes that hold their default, the lowering reads the same values.
    kept = [
        a
        for a in node.attribute
        if a.type == onnx.AttributeProto.GRAPH
        or spec.attribute(a.name).default is REQUIRED
        or decode_attribute(a) != spec.default(a.name)
    ]
    bare = onnx.helper.make_node(
        node.op_type, node.input, node.output, domain=node.domain, name=node.name
    )
    bare.attribute.extend(kept)
    bare_attrs = lowerer.lower_node(bare).attrs
    for attribute in spec.attributes:
        if attribute.type != onnx.AttributeProto.GRAPH:
            assert bare_attrs[attribute.name] == attrs[attribute.name], attribute.name


def _lowered_attrs(op_type: str, **attributes):
    node = onnx.helper.make_node(op_type, ["x"], ["y"], domain="ai.graphcore", **attributes)
    return Lowerer({"": 11, "ai.graphcore": 1}).lower_node(node).attrs


# The defaults the lowering used to give as decimal numbers are the original's float
# attributes (willow/src/op/groupnorm.cpp, batchnorm.cpp: 1e-5f, 0.9f).
@pytest.mark.parametrize(
    "op_type, attribute, value",
    [
        ("GroupNormalization", "epsilon", 1e-5),
        ("BatchNormalization", "epsilon", 1e-5),
        ("BatchNormalization", "momentum", 0.9),
    ],
)
def test_float_defaults_are_the_originals_float32_values(op_type, attribute, value):
    extra = {"num_groups": 1} if op_type == "GroupNormalization" else {}
    lowered = _lowered_attrs(op_type, **extra)[attribute]
    assert lowered == float(np.float32(value)) != value  # the lowering used `value`
    method = getattr(popart.Builder().aiGraphcore, op_type.lower())
    assert inspect.signature(method).parameters[attribute].default == lowered


# Parameters the builder requires but the original's op reads with a default: a node from
# elsewhere without them means the default (willow/src/op/scale.cpp, reverse.cpp, slice.cpp).
@pytest.mark.parametrize(
    "op_type, attribute, value",
    [("Scale", "scale", 1.0), ("Reverse", "dimensions", []), ("Slice", "axes", [])],
)
def test_defaults_of_parameters_the_builder_requires(op_type, attribute, value):
    extra = {"starts": [0], "ends": [1]} if op_type == "Slice" else {}
    assert _lowered_attrs(op_type, **extra)[attribute] == value
