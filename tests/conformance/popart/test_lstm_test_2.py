"""graphcore/popart tests/integration/operators_test/lstm_test_2.py: the gradients of every
LSTM input; LSTM models as torch.onnx.export writes them (torch's weights as initializers,
regrouped into ONNX's gate order by the graph; zero initial states from ConstantOfShape)
imported by file and run for inference, training (the gradients of the torch-named weights)
and step by step with the state fed back; an LSTM with a sequence-lengths input in float16
compiled for training with and without the LSTMOp pattern; and the original's regression
models (IpuModel2, as the original's CMake). torch is not installed: the exported models are
built with onnx.helper as the exporter lays them out, and torch's LSTM is written out in
stock TensorFlow."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from popart_onnx_reference import OnnxReference, check_against_onnx

import popart
from conftest import create_test_device

DEVICE = "IpuModel2"
G = popart.reservedGradientPrefix()
# torch.nn.LSTM's parameters (gates in torch's order: input, forget, cell, output).
TORCH_PARAMETERS = ("lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0")


def _rand(*shape):
    return np.random.rand(*shape).astype(np.float32)


def torch_lstm(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh):
    """torch.nn.LSTM (one layer, sequence first) in TensorFlow: (Y, Y_h, Y_c)."""
    import tensorflow as tf

    h, c = h0[0], c0[0]
    outputs = []
    for step in range(x.shape[0]):
        gates = (
            tf.matmul(x[step], weight_ih, transpose_b=True)
            + bias_ih
            + tf.matmul(h, weight_hh, transpose_b=True)
            + bias_hh
        )
        i, f, g, o = tf.split(gates, 4, axis=-1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
        outputs.append(h)
    return tf.stack(outputs), h[None], c[None]


def torch_parameters(input_size, hidden_size):
    scale = 1 / np.sqrt(hidden_size)  # torch's uniform(-1/sqrt(H), 1/sqrt(H))
    shapes = [(4 * hidden_size, input_size), (4 * hidden_size, hidden_size)]
    shapes += [(4 * hidden_size,)] * 2
    return [np.random.uniform(-scale, scale, shape).astype(np.float32) for shape in shapes]


def _onnx_gate_order(nodes, name, axis):
    """Nodes regrouping torch's gates (i, f, g, o) of `name` into ONNX's (i, o, f, c) along
    `axis`, as torch.onnx.export writes them; returns the regrouped tensor's name."""
    parts = [f"{name}_{gate}" for gate in "ifgo"]
    nodes.append(helper.make_node("Split", [name], parts, axis=axis))
    nodes.append(
        helper.make_node(
            "Concat", [parts[0], parts[3], parts[1], parts[2]], [f"{name}_onnx"], axis=axis
        )
    )
    return f"{name}_onnx"


def exported_lstm_model(
    parameters, seq_length, batch_size, input_size, hidden_size, summed=False, batch_first=False
) -> onnx.ModelProto:
    """An LSTM module exported by torch.onnx.export (opset 11, no constant folding)."""
    nodes: list[onnx.NodeProto] = []
    w_ih, w_hh, b_ih, b_hh = (_onnx_gate_order(nodes, name, 0) for name in TORCH_PARAMETERS)
    nodes += [
        helper.make_node("Unsqueeze", [w_ih], ["W"], axes=[0]),
        helper.make_node("Unsqueeze", [w_hh], ["R"], axes=[0]),
        helper.make_node("Concat", [b_ih, b_hh], ["B1"], axis=0),
        helper.make_node("Unsqueeze", ["B1"], ["B"], axes=[0]),
    ]
    inputs = []
    if batch_first:
        # Zero initial states of the batch size read from the data, through ConstantOfShape.
        data_shape = [batch_size, seq_length, input_size]
        inputs.append(helper.make_tensor_value_info("data", TensorProto.FLOAT, data_shape))
        nodes += [
            helper.make_node("Transpose", ["data"], ["X"], perm=[1, 0, 2]),
            helper.make_node("Shape", ["data"], ["data_shape"]),
            helper.make_node(
                "Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))
            ),
            helper.make_node("Gather", ["data_shape", "zero"], ["batch"], axis=0),
            helper.make_node("Unsqueeze", ["batch"], ["batch_1d"], axes=[0]),
            helper.make_node(
                "Constant", [], ["one"], value=numpy_helper.from_array(np.array([1], np.int64))
            ),
            helper.make_node(
                "Constant",
                [],
                ["hidden"],
                value=numpy_helper.from_array(np.array([hidden_size], np.int64)),
            ),
            helper.make_node("Concat", ["one", "batch_1d", "hidden"], ["state_shape"], axis=0),
            helper.make_node(
                "ConstantOfShape",
                ["state_shape"],
                ["initial_h"],
                value=numpy_helper.from_array(np.array([0.0], np.float32)),
            ),
            helper.make_node(
                "ConstantOfShape",
                ["state_shape"],
                ["initial_c"],
                value=numpy_helper.from_array(np.array([0.0], np.float32)),
            ),
        ]
    else:
        for name, shape in (
            ("X", [seq_length, batch_size, input_size]),
            ("initial_h", [1, batch_size, hidden_size]),
            ("initial_c", [1, batch_size, hidden_size]),
        ):
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    nodes += [
        helper.make_node(
            "LSTM",
            ["X", "W", "R", "B", "", "initial_h", "initial_c"],
            ["Y4", "Y_h", "Y_c"],
            hidden_size=hidden_size,
        ),
        helper.make_node("Squeeze", ["Y4"], ["Y"], axes=[1]),
    ]
    sequence = [seq_length, batch_size, hidden_size]
    state = [1, batch_size, hidden_size]
    if summed:
        nodes += [
            helper.make_node("Add", ["Y", "Y_h"], ["Y_plus_h"]),
            helper.make_node("Add", ["Y_plus_h", "Y_c"], ["out"]),
        ]
        outputs = {"out": sequence}
    elif batch_first:
        nodes.append(helper.make_node("Transpose", ["Y"], ["tag"], perm=[1, 0, 2]))
        outputs = {"tag": [batch_size, seq_length, hidden_size]}
    else:
        outputs = {"Y": sequence, "Y_h": state, "Y_c": state}
    graph = helper.make_graph(
        nodes,
        "torch_jit",
        inputs,
        [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
            for name, shape in outputs.items()
        ],
        initializer=[
            numpy_helper.from_array(value, name)
            for name, value in zip(TORCH_PARAMETERS, parameters, strict=True)
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.slow
@pytest.mark.follows("test_lstm_torch_grad_all_inputs")
def test_lstm_torch_grad_all_inputs(op_tester):
    # The gradients of the data, weights, biases and both initial states.
    d1 = np.arange(1, 13, dtype=np.float32).reshape(2, 2, 3)
    hidden_size, batch_size = 2, 2
    inputs = [
        d1,
        _rand(1, 4 * hidden_size, 3),
        _rand(1, 4 * hidden_size, hidden_size),
        _rand(1, 8 * hidden_size),
        np.full(batch_size, 2, np.int32),
        _rand(1, batch_size, hidden_size),
        _rand(1, batch_size, hidden_size),
    ]

    def build(builder, ids):
        y, y_h, _ = builder.aiOnnx.lstm(ids, 3)
        return [builder.aiOnnx.add([builder.aiOnnx.squeeze([y], []), y_h])]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.atol, op_tester.rtol = 1e-06, 1e-04
    check_against_onnx(op_tester, inputs, build, [0, 1, 2, 3, 5, 6])


def _exported(tmp_path, seq_length=5, batch_size=2, input_size=2, hidden_size=7, **kwargs):
    parameters = torch_parameters(input_size, hidden_size)
    model = exported_lstm_model(
        parameters, seq_length, batch_size, input_size, hidden_size, **kwargs
    )
    path = str(tmp_path / "bar.onnx")
    onnx.save(model, path)
    return path, parameters


def _inference_session(path, anchors, **kwargs):
    session = popart.InferenceSession(
        fnModel=path,
        dataFlow=popart.DataFlow(1, anchors),
        deviceInfo=create_test_device(DEVICE),
        **kwargs,
    )
    anchor_map = session.initAnchorArrays()
    session.prepareDevice()
    return session, anchor_map


@pytest.mark.follows("test_import_torch_lstm")
def test_import_torch_lstm(tmp_path):
    path, parameters = _exported(tmp_path)
    x, h0, c0 = _rand(5, 2, 2), _rand(1, 2, 7), _rand(1, 2, 7)
    outputs = popart.Builder(path).getOutputTensorIds()
    assert outputs == ["Y", "Y_h", "Y_c"]
    session, anchors = _inference_session(path, outputs)
    session.run(popart.PyStepIO({"X": x, "initial_h": h0, "initial_c": c0}, anchors))
    for name, expected in zip(outputs, torch_lstm(x, h0, c0, *parameters), strict=True):
        np.testing.assert_allclose(anchors[name], expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.follows("test_import_torch_lstm_train")
def test_import_torch_lstm_train(tmp_path):
    import tensorflow as tf

    path, parameters = _exported(tmp_path, summed=True)
    x, h0, c0 = _rand(5, 2, 2), _rand(1, 2, 7), _rand(1, 2, 7)
    builder = popart.Builder(path)
    loss = builder.aiGraphcore.identityloss(["out"])
    wrt = ["X", "initial_h", "initial_c", *TORCH_PARAMETERS]
    anchors = [*builder.getOutputTensorIds(), G + "out", *(G + name for name in wrt)]
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, anchors),
        optimizer=popart.ConstSGD(0.1),
        loss=loss,
        patterns=popart.Patterns(["PreUniRepl"]).enableRuntimeAsserts(False),
        deviceInfo=create_test_device(DEVICE),
    )
    anchor_map = session.initAnchorArrays()
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO({"X": x, "initial_h": h0, "initial_c": c0}, anchor_map))

    variables = [tf.Variable(v) for v in (x, h0, c0, *parameters)]
    with tf.GradientTape() as tape:
        y, y_h, y_c = torch_lstm(*variables)
        out = y + y_h + y_c
    grads = tape.gradient(out, variables, output_gradients=tf.constant(anchor_map[G + "out"]))
    np.testing.assert_allclose(anchor_map["out"], out.numpy(), rtol=1e-5, atol=1e-6)
    for name, grad in zip(wrt, grads, strict=True):
        np.testing.assert_allclose(anchor_map[G + name], grad.numpy(), rtol=1e-4, atol=1e-6)

    # The update torch's SGD(0.1) makes, in the model written back.
    written = str(tmp_path / "popart_bar.onnx")
    session.modelToHost(written)
    trained = {t.name: numpy_helper.to_array(t) for t in onnx.load(written).graph.initializer}
    for name, value, grad in zip(TORCH_PARAMETERS, parameters, grads[3:], strict=True):
        np.testing.assert_allclose(trained[name], value - 0.1 * grad.numpy(), atol=1e-6)


@pytest.mark.follows("test_import_torch_lstm_multi_run")
def test_import_torch_lstm_multi_run(tmp_path):
    # Exported for one time step, run once per step with the state fed back.
    path, parameters = _exported(tmp_path, seq_length=1)
    x, h0, c0 = _rand(5, 2, 2), _rand(1, 2, 7), _rand(1, 2, 7)
    session, anchors = _inference_session(path, ["Y", "Y_h", "Y_c"])
    h, c, outs = h0, c0, []
    for step in range(x.shape[0]):
        session.run(
            popart.PyStepIO({"X": x[step : step + 1], "initial_h": h, "initial_c": c}, anchors)
        )
        h, c = anchors["Y_h"].copy(), anchors["Y_c"].copy()
        outs.append(anchors["Y"].copy())
    expected = torch_lstm(x, h0, c0, *parameters)
    for actual, wanted in zip((np.concatenate(outs), h, c), expected, strict=True):
        np.testing.assert_allclose(actual, wanted.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.follows("test_lstm_export_with_constantofshape")
def test_lstm_export_with_constantofshape(tmp_path):
    # batch_first, the zero initial states made by ConstantOfShape, the input's shape given
    # by InputShapeInfo.
    path, parameters = _exported(
        tmp_path, seq_length=20, batch_size=1, input_size=18, hidden_size=8, batch_first=True
    )
    model = onnx.load(path)
    assert any(node.op_type == "ConstantOfShape" for node in model.graph.node)
    data = _rand(1, 20, 18)
    shape_info = popart.InputShapeInfo()
    shape_info.add("data", popart.TensorInfo("FLOAT", [1, 20, 18]))
    session, anchors = _inference_session(
        path, {"tag": popart.AnchorReturnType("All")}, inputShapeInfo=shape_info
    )
    session.run(popart.PyStepIO({"data": data}, anchors))
    zeros = np.zeros((1, 1, 8), np.float32)
    y, _, _ = torch_lstm(data.transpose(1, 0, 2), zeros, zeros, *parameters)
    expected = y.numpy().transpose(1, 0, 2)
    assert anchors["tag"].shape == expected.shape
    np.testing.assert_allclose(anchors["tag"], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.follows("test_lstm_extra_inputs")
@pytest.mark.parametrize("enable_pattern", [True, False])
def test_lstm_extra_inputs(enable_pattern):
    # A float16 LSTM given sequence lengths (an input) compiles for training.
    batch, features, hidden, steps = 4, 6, 5, 8
    builder = popart.Builder()
    mel = builder.addInputTensor(popart.TensorInfo("FLOAT16", [batch, features, steps]), "mel")
    lengths = builder.addInputTensor(popart.TensorInfo("INT32", [batch]), "input_length")
    x = builder.aiOnnx.transpose([mel], perm=[2, 0, 1])
    weights = [
        builder.addInitializedInputTensor(np.random.rand(*shape).astype(np.float16))
        for shape in ([1, 4 * hidden, features], [1, 4 * hidden, hidden])
    ]
    zeros = [
        builder.addInitializedInputTensor(np.zeros(shape, np.float16))
        for shape in ([1, 8 * hidden], [1, batch, hidden], [1, batch, hidden])
    ]
    y, _, _ = builder.aiOnnx.lstm([x, *weights, zeros[0], lengths, *zeros[1:]], 3, clip=None)
    loss = builder.aiGraphcore.l1loss([y], 1.0, reduction=popart.ReductionType.Mean)
    options = popart.SessionOptions()
    options.engineOptions = {"debug.allowOutOfMemory": "true"}
    options.reportOptions = {"showVarStorage": "true"}
    options.constantWeights = False
    patterns = popart.Patterns(popart.PatternsLevel.Default)
    patterns.enablePattern("LSTMOp", enable_pattern)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        loss=loss,
        deviceInfo=create_test_device(DEVICE),
        optimizer=popart.SGD(
            {"defaultLearningRate": (0.001, False), "defaultWeightDecay": (0, True)}
        ),
        dataFlow=popart.DataFlow(2, {loss: popart.AnchorReturnType("ALL")}),
        userOptions=options,
        patterns=patterns,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.weightsFromHost()
    # Beyond the original (which stops at weightsFromHost): a step gives a finite loss.
    data = np.random.rand(2, batch, features, steps).astype(np.float16)
    session.run(
        popart.PyStepIO({mel: data, lengths: np.full((2, batch), steps, np.int32)}, anchors)
    )
    assert anchors[loss].shape == (2,) and np.isfinite(anchors[loss]).all()


@pytest.mark.slow
@pytest.mark.follows("test_poplar_tile_ex")
def test_poplar_tile_ex(op_tester):
    hidden = 32
    d2 = np.random.normal(0, 1, [1, 4 * hidden, hidden]).astype(np.float32)
    d3 = np.random.normal(0, 1, [1, 4 * hidden, hidden]).astype(np.float32)
    data = np.random.uniform(-1, 1, [10, 1, hidden]).astype(np.float32)
    recorded = {}

    def init_builder(builder):
        i1 = builder.addInputTensor(data, "input_sequences")
        i2 = builder.addInitializedInputTensor(d2)
        i3 = builder.addInitializedInputTensor(d3)
        out, y_h, y_c = builder.aiOnnx.lstm([i1, i2, i3], 3, clip=None)
        builder.addOutputTensor(out)
        recorded.update(ids=(i1, i2, i3), outputs=[out, y_h, y_c])
        recorded["model"] = builder.getModelProto()
        return [out, y_h, y_c]

    def reference(_):
        evaluator = OnnxReference(recorded["model"], recorded["outputs"])
        feeds = dict(zip(recorded["ids"], (data, d2, d3), strict=True))
        return [r.astype(np.float32) for r in evaluator.run(feeds)]

    op_tester.atol = 1e-6
    op_tester.setPatterns(["LSTMOp", "SplitGradOpToConcat"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")


@pytest.mark.slow
@pytest.mark.follows("test_missing_seq_len")
def test_missing_seq_len(op_tester):
    # A float16 LSTM after a Transpose, with unused biases and sequence-lengths tensors in
    # the model, trains (the original's regression: a "missing seq_lens" tensor).
    steps, batch, features, hidden = 5, 2, 3, 7
    data = np.random.rand(batch, features, steps).astype(np.float16)

    def init_builder(builder):
        i1 = builder.aiOnnx.transpose([builder.addInputTensor(data)], perm=[2, 0, 1])
        i2 = builder.addInitializedInputTensor(
            np.random.rand(1, 4 * hidden, features).astype(np.float16)
        )
        i3 = builder.addInitializedInputTensor(
            np.random.rand(1, 4 * hidden, hidden).astype(np.float16)
        )
        builder.addInitializedInputTensor(np.random.rand(1, 8 * hidden).astype(np.float16))
        builder.addInputTensor(np.full(batch, steps, np.float16))
        out, _, _ = builder.aiOnnx.lstm([i1, i2, i3], 3, clip=None)
        builder.addOutputTensor(out)
        return [out]

    def reference(ref_data):
        out = ref_data.getOutputTensor(0)
        assert out.shape == (steps, 1, batch, hidden) and np.isfinite(out).all()
        return [None]

    op_tester.setPatterns(["LSTMOp", "SplitGradOpToConcat"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")
