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


def _two_ipu_chain(mode):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4]), "x")
    with builder.virtualGraph(0):
        h = builder.aiOnnx.sin([x])
    with builder.virtualGraph(1):
        y = builder.aiOnnx.cos([h])
    options = popart.SessionOptions()
    options.virtualGraphMode = mode
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [y]),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
        userOptions=options,
    )
    return [
        (op["type"], [t["name"] for t in op["inputs"]], op["attributes"].get("__ipu_number"))
        for op in _main_graph(session)
    ], h


def test_a_tensor_read_on_another_ipu_is_copied_there():
    ops, h = _two_ipu_chain(popart.VirtualGraphMode.Manual)
    # willow/src/transforms/interipucopy.cpp: <id>_c<destination>, copied from its source.
    assert ops == [("Sin", ["x"], "0"), ("IpuCopy", [h], "0"), ("Cos", [h + "_c1"], "1")]


def test_without_virtual_graphs_the_annotations_are_dropped():
    ops, h = _two_ipu_chain(popart.VirtualGraphMode.Off)
    assert ops == [("Sin", ["x"], None), ("Cos", [h], None)]


def _training_session(builder, loss):
    """Default patterns without inplacing, plain SGD, the loss anchored."""
    patterns = popart.Patterns(popart.PatternsLevel.Default)
    patterns.InPlace = False
    return popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [loss]),
        loss=loss,
        optimizer=popart.ConstSGD(0.1),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        patterns=patterns,
    )


def test_training_describes_grad_ops_their_sums_and_the_weight_update():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    w = builder.addInitializedInputTensor(np.ones(3, np.float32), "w")
    product = builder.aiOnnx.mul([x, w])
    total = builder.aiOnnx.add([product, w])  # w is read twice: two partial gradients
    loss = builder.aiGraphcore.l1loss([total], 0.1)
    session = _training_session(builder, loss)
    ops = [
        (op["type"], [t["name"] for t in op["inputs"]], [t["name"] for t in op["outputs"]])
        for op in _main_graph(session)
    ]
    g = popart.reservedGradientPrefix()
    forward = [("Mul", [x, w], [product]), ("Add", [product, w], [total]), ("L1", [total], [loss])]
    assert ops[:3] == forward
    backward = ops[3:]
    assert [op[0] for op in backward] == [
        "L1Grad", "AddArg0Grad", "AddArg1Grad", "MulArg1Grad", "Sum", "SGD0VarUpdate",
    ]  # fmt: skip
    assert backward[0][1:] == ([g + loss], [g + total])
    # Partial gradients of w (willow/src/tensornames.cpp getEdgeGradId), summed.
    assert backward[4][2] == [g + w] and backward[4][1] == [backward[2][2][0], backward[3][2][0]]
    assert backward[3][1] == [g + product, x]  # the gradient, the other operand
    assert backward[5][1:] == ([w, g + w], [popart.reservedUpdatedVarPrefix() + w])


def test_matmul_grad_ops_become_transposes_and_matmuls_summed_over_broadcast_groups():
    # lhs [1 3 4] broadcast against rhs [2 4 5]: the lhs's gradient, dOut @ rhs^T, has
    # numpy's shape [2 3 4] and is summed over the group axis back to [1 3 4]
    # (willow/src/patterns/matmulgradpattern.cpp); the rhs's, lhs^T @ dOut, is [2 4 5].
    lhs_data = np.ones((1, 3, 4), np.float32)
    rhs_data = np.ones((2, 4, 5), np.float32)
    builder = popart.Builder()
    lhs = builder.addInitializedInputTensor(lhs_data, "lhs")
    rhs = builder.addInitializedInputTensor(rhs_data, "rhs")
    out = builder.aiOnnx.matmul([lhs, rhs])
    loss = builder.aiGraphcore.l1loss([out], 0.1)
    session = _training_session(builder, loss)
    graph = _main_graph(session)
    g = popart.reservedGradientPrefix()
    types = [op["type"] for op in graph]
    assert "MatMulLhsGrad" not in types and "MatMulRhsGrad" not in types
    matmuls = [op for op in graph if op["type"] == "MatMul"]
    d_out = np.ones((2, 3, 5), np.float32)
    lhs_grad = d_out @ np.swapaxes(rhs_data, -1, -2)
    rhs_grad = np.swapaxes(lhs_data, -1, -2) @ d_out
    assert [[t["shape"] for t in op["inputs"]] for op in matmuls[1:]] == [
        ["[2 3 5]", "[2 5 4]"],
        ["[1 4 3]", "[2 3 5]"],
    ]
    assert [op["outputs"][0]["name"] for op in matmuls][2] == g + rhs
    (reduce_sum,) = [op for op in graph if op["type"] == "ReduceSum"]
    assert reduce_sum["inputs"][0]["shape"] == "[" + " ".join(map(str, lhs_grad.shape)) + "]"
    assert reduce_sum["attributes"]["axes"] == "[0]"
    reshape = next(op for op in graph if op["outputs"][0]["name"] == g + lhs)
    assert reshape["type"] == "Reshape"
    assert rhs_grad.shape == rhs_data.shape and lhs_grad.sum(0, keepdims=True).shape == (1, 3, 4)


def test_host_copy_ops_load_the_streams_and_store_the_anchors():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4]), "x")
    y = builder.aiOnnx.sin([x])
    options = popart.SessionOptions()
    options.useHostCopyOps = True
    patterns = popart.Patterns(popart.PatternsLevel.Default)
    patterns.InPlace = False
    graph = _main_graph(_session(builder, [y], options, patterns))
    assert [op["type"] for op in graph] == ["Init", "HostLoad", "Sin", "HostStore"]
    init, load, sin, store = graph
    assert load["inputs"][0]["name"] == init["outputs"][0]["name"]
    assert sin["inputs"][0]["name"] == load["outputs"][0]["name"] != x
    assert store["inputs"][0]["name"] == y
    # Scheduled last (the lowest priority), as willow/src/transforms/hostiosetup.cpp does.
    assert {op["attributes"]["schedulePriority"] for op in (init, load, store)} == {"-inf"}
