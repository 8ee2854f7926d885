"""`Session._serializeIr` and the IR's .dot files: the ops the original's IR would hold
(willow/src/ir.cpp serialise; patterns and inplacing as in willow/src/patterns, transforms)."""

import json

import numpy as np
import pytest

import popart


def _session(builder, anchors, options=None, patterns=None):
    return popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, anchors),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        userOptions=options or popart.SessionOptions(),
        patterns=patterns,
    )


def _main_graph(session):
    return json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))["maingraph"]


def test_ops_carry_the_original_fields_with_shapes_and_types_as_strings():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT16", [2, 3]), "x")
    y = builder.aiOnnx.transpose([x], perm=[1, 0])
    builder.addOutputTensor(y)
    (op,) = _main_graph(_session(builder, [y]))
    assert op["type"] == "TransposeInplace"
    assert op["inputs"] == [{"name": x, "shape": "[2 3]", "type": "FLOAT16", "index": "0"}]
    assert op["outputs"] == [{"name": y, "index": "0"}]
    assert op["attributes"]["perm"] == "[1 0]"


def test_constants_are_folded_and_weights_only_when_constant():
    builder = popart.Builder()
    w = builder.addInitializedInputTensor(np.ones((2, 3), np.float32))
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3, 2]))
    y = builder.aiOnnx.add([builder.aiOnnx.transpose([w]), x])
    patterns = popart.Patterns(popart.PatternsLevel.Default)
    patterns.InPlace = False
    constant = [op["type"] for op in _main_graph(_session(builder, [y], patterns=patterns))]
    options = popart.SessionOptions()
    options.constantWeights = False
    variable = [op["type"] for op in _main_graph(_session(builder, [y], options, patterns))]
    assert constant == ["Add"]
    assert variable == ["Transpose", "Add"]


def test_no_op_modifies_a_weight_in_place():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4]))
    w = builder.addInitializedInputTensor(np.ones(4, np.float32))
    y = builder.aiOnnx.add([w, builder.aiOnnx.sin([x])])
    options = popart.SessionOptions()
    options.constantWeights = False
    assert [op["type"] for op in _main_graph(_session(builder, [y], options))] == [
        "Sin",
        "AddRhsInplace",
    ]


def test_an_op_is_not_made_to_modify_a_tensor_read_after_it():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4]))
    s = builder.aiOnnx.sin([x])
    doubled = builder.aiOnnx.add([s, s])
    y = builder.aiOnnx.mul([doubled, s])  # reads s after the Add
    types = [op["type"] for op in _main_graph(_session(builder, [y]))]
    assert types == ["Sin", "Add", "MulLhsInplace"]


def test_serialize_ir_takes_an_ir_serialization_format():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    y = builder.aiOnnx.relu([x])
    with pytest.raises(Exception, match="format"):
        _session(builder, [y])._serializeIr("JSON")


def test_dot_range_without_ops_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("POPART_DOT_CHECKS", "FINAL")
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    y = builder.aiOnnx.relu([x])
    options = popart.SessionOptions()
    options.logDir = str(tmp_path)
    options.firstDotOp = 5
    with pytest.raises(popart.popart_exception, match="Invalid dot range"):
        _session(builder, [y], options)
    options.firstDotOp = 0
    options.separateCallOpPdfs = False
    _session(builder, [y], options)
    assert [p.name for p in tmp_path.iterdir()] == ["Final_all.dot"]


def test_excluding_a_pattern_only_transforms_know_is_accepted():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    y = builder.aiOnnx.identity([x])
    builder.excludePatterns(y, ["ViewSimplifyPattern", "SGD1Decompose"])
    z = builder.aiOnnx.identity([y])
    assert [op["type"] for op in _main_graph(_session(builder, [z]))] == ["IdentityInplace"]
