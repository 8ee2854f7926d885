"""graphcore/popart tests/integration/operators_test/lstm_test.py: ONNX LSTM forward (with
biases, initial states and sequence lengths) and its gradients against onnx.reference's LSTM
and central differences of it; PopART's own ai.graphcore LSTM (weights [4, I+H, H], gates
forget, input, candidate, output) giving the ONNX LSTM's values and gradients; an unsupported activation
refused; and the IR checks (one LSTM; four identical LSTMs outlined into one, which fit
the 4 tiles as their code is shared) (IpuModel2, as the original's CMake)."""

import json

import numpy as np
import pytest
from popart_onnx_reference import check_against_onnx

import popart
from conftest import create_test_device

DEVICE = "IpuModel2"
D1 = np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]]).astype(
    np.float32
)


def _rand(*shape):
    return np.random.rand(*shape).astype(np.float32)


@pytest.mark.follows("test_lstm")
def test_lstm(op_tester):
    op_tester.atol = 1e-06
    check_against_onnx(
        op_tester,
        [D1, _rand(1, 28, 3), np.zeros((1, 28, 7), np.float32)],
        lambda b, ids: b.aiOnnx.lstm(ids, 3, clip=None),
    )


def _ir_of_training(op_tester, init_builder, outputs):
    op_tester.setPatterns(["LSTMOp", "SplitGradOpToConcat"], enableRuntimeAsserts=False)
    session = op_tester.run(init_builder, lambda _: [None] * outputs, "train")
    return json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))


@pytest.mark.follows("test_lstm_popart")
def test_lstm_popart(op_tester):
    def init_builder(builder):
        i1 = builder.addInputTensor(D1, "input_data")
        i2 = builder.addInitializedInputTensor(_rand(1, 28, 3))
        i3 = builder.addInitializedInputTensor(np.zeros((1, 28, 7), np.float32))
        outputs = builder.aiOnnx.lstm([i1, i2, i3], 3, clip=None)
        builder.addOutputTensor(outputs[0])
        return outputs

    graph = _ir_of_training(op_tester, init_builder, 3)["maingraph"]
    assert len([op for op in graph if op["type"] == "LSTM"]) == 1


@pytest.mark.follows("test_lstm_outlining")
def test_lstm_outlining(op_tester):
    def init_builder(builder):
        x = builder.addInputTensor(D1)
        w = builder.addInitializedInputTensor(_rand(1, 12, 3))
        r = builder.addInitializedInputTensor(np.zeros((1, 12, 3), np.float32))
        for _ in range(4):
            y = builder.aiOnnx.lstm([x, w, r], 3, clip=None)[0]
            x = builder.aiOnnx.squeeze([y])
        y = builder.aiOnnx.identity([y])
        builder.addOutputTensor(y)
        return [y]

    ir = _ir_of_training(op_tester, init_builder, 1)
    assert not [op for op in ir["maingraph"] if op["type"] == "LSTM"]
    assert len([op for graph in ir.values() for op in graph if op["type"] == "LSTM"]) == 1


def _run_inference(build, inputs):
    """The first output of `build(builder, input ids)`, run once on the IpuModel2."""
    builder = popart.Builder()
    ids = [builder.addInputTensor(popart.TensorInfo(i)) for i in inputs]
    out = build(builder, ids)
    builder.addOutputTensor(out)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        deviceInfo=create_test_device(DEVICE),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO(dict(zip(ids, inputs, strict=True)), anchors))
    return anchors[out]


def _onnx_inputs(seq_length, batch_size, hidden_size):
    return [
        _rand(seq_length, batch_size, 3),
        _rand(1, 4 * hidden_size, 3),
        _rand(1, 4 * hidden_size, hidden_size),
        _rand(1, 8 * hidden_size),
        np.asarray([seq_length] * batch_size).astype(np.int32),
        _rand(1, batch_size, hidden_size),
        _rand(1, batch_size, hidden_size),
    ]


def _onnx_lstm_output(inputs):
    return np.squeeze(_run_inference(lambda b, ids: b.aiOnnx.lstm(ids, 3, clip=None)[0], inputs))


# PopART's LSTM orders the gates forget, input, candidate, output; ONNX's are input, output,
# forget, candidate (chunks 2, 0, 3, 1 of ONNX's).
GATE_ORDER = (2, 0, 3, 1)


@pytest.mark.follows("test_lstm_onnx_vs_popart")
def test_lstm_onnx_vs_popart():
    seq_length, batch_size, hidden = 5, 2, 7
    inputs = _onnx_inputs(seq_length, batch_size, hidden)
    data, w, r, biases, _, initial_h, initial_c = inputs

    def popart_weight(onnx_weight):
        chunks = np.split(onnx_weight[0], 4)
        return np.stack([chunks[i].T for i in GATE_ORDER])

    chunks = np.split(biases, 8, axis=1)
    popart_biases = np.concatenate([chunks[i] for i in GATE_ORDER])
    popart_biases += np.concatenate([chunks[i + 4] for i in GATE_ORDER])
    popart_inputs = [
        data,
        np.ascontiguousarray(np.concatenate((popart_weight(w), popart_weight(r)), axis=1)),
        popart_biases,
        np.concatenate((initial_h, initial_c)),
    ]

    def build_popart(builder, ids):
        y, y_c = builder.aiGraphcore.lstm(ids)
        assert builder.getTensorDtypeString(y) == "float32"
        assert builder.getTensorDtypeString(y_c) == "float32"
        assert builder.getTensorShape(y) == [seq_length, batch_size, hidden]
        assert builder.getTensorShape(y_c) == [batch_size, hidden]
        return y

    popart_out = _run_inference(build_popart, popart_inputs)
    np.testing.assert_allclose(_onnx_lstm_output(inputs), popart_out, rtol=1e-6, atol=1e-7)


@pytest.mark.follows("test_lstm_onnx_vs_popart_2")
def test_lstm_onnx_vs_popart_2():
    seq_length, batch_size, hidden = 2, 5, 7
    inputs = _onnx_inputs(seq_length, batch_size, hidden)

    def build_popart(builder, ids):
        data, w, r, biases, _, initial_h, initial_c = ids

        def reshape_weights(weight):
            parts = builder.aiOnnx.split([weight], 4, 1, [hidden] * 4)
            parts = [builder.aiOnnx.transpose([p], [0, 2, 1]) for p in parts]
            return builder.aiOnnx.concat([parts[i] for i in GATE_ORDER], 0)

        weights = builder.aiOnnx.concat([reshape_weights(w), reshape_weights(r)], 1)
        parts = builder.aiOnnx.split([biases], 8, 1, [hidden] * 8)
        bias = builder.aiOnnx.add(
            [
                builder.aiOnnx.concat([parts[i] for i in GATE_ORDER], 0),
                builder.aiOnnx.concat([parts[i + 4] for i in GATE_ORDER], 0),
            ]
        )
        state = builder.aiOnnx.concat([initial_h, initial_c], 0)
        y, y_c = builder.aiGraphcore.lstm([data, weights, bias, state])
        assert builder.getTensorDtypeString(y) == "float32"
        assert builder.getTensorDtypeString(y_c) == "float32"
        return y

    popart_out = _run_inference(build_popart, inputs)
    np.testing.assert_allclose(_onnx_lstm_output(inputs), popart_out, rtol=1e-6, atol=1e-7)


def _train_gradients(build, data, weights, inputs):
    """Gradients of identityloss(Y) with respect to the data and the initialized `weights`,
    for the Y of `build(builder, data id, weight ids, input ids)`, on the IpuModel2."""
    builder = popart.Builder()
    data_id = builder.addInputTensor(popart.TensorInfo(data))
    weight_ids = [builder.addInitializedInputTensor(w) for w in weights]
    input_ids = [builder.addInputTensor(popart.TensorInfo(i)) for i in inputs]
    y = build(builder, data_id, weight_ids, input_ids)
    loss = builder.aiGraphcore.identityloss([y])
    grads = [popart.reservedGradientPrefix() + t for t in (data_id, *weight_ids)]
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {a: popart.AnchorReturnType("All") for a in grads}),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
        deviceInfo=create_test_device(DEVICE),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    feeds = dict(zip([data_id, *input_ids], [data, *inputs], strict=True))
    session.run(popart.PyStepIO(feeds, anchors))
    return [anchors[g] for g in grads]


@pytest.mark.follows("test_lstm_training_onnx_vs_popart")
def test_lstm_training_onnx_vs_popart():
    hidden = 7
    data, w, r, biases, seq_lens, initial_h, initial_c = _onnx_inputs(2, 2, hidden)

    def build_onnx(builder, x, weights, inputs):
        return builder.aiOnnx.lstm([x, *weights, *inputs], 3, clip=None)[0]

    def build_popart(builder, x, weights, inputs):
        w_id, r_id, b_id = weights

        def reshape_weights(weight):
            parts = builder.aiOnnx.split([weight], 4, 1, [hidden] * 4)
            parts = [builder.aiOnnx.transpose([p], [0, 2, 1]) for p in parts]
            return builder.aiOnnx.concat([parts[i] for i in GATE_ORDER], 0)

        stacked = builder.aiOnnx.concat([reshape_weights(w_id), reshape_weights(r_id)], 1)
        parts = builder.aiOnnx.split([b_id], 8, 1, [hidden] * 8)
        bias = builder.aiOnnx.add(
            [
                builder.aiOnnx.concat([parts[i] for i in GATE_ORDER], 0),
                builder.aiOnnx.concat([parts[i + 4] for i in GATE_ORDER], 0),
            ]
        )
        state = builder.aiOnnx.concat(inputs, 0)
        return builder.aiGraphcore.lstm([x, stacked, bias, state])[0]

    onnx_grads = _train_gradients(
        build_onnx, data, [w, r, biases], [seq_lens, initial_h, initial_c]
    )
    popart_grads = _train_gradients(build_popart, data, [w, r, biases], [initial_h, initial_c])
    for onnx_grad, popart_grad in zip(onnx_grads, popart_grads, strict=True):
        np.testing.assert_allclose(onnx_grad, popart_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.follows("test_lstm_torch")
def test_lstm_torch(op_tester):
    d1 = (np.arange(15, dtype=np.float32) * 0.05).reshape(5, 1, 3)
    op_tester.atol = 1e-06
    check_against_onnx(
        op_tester, [d1, _rand(1, 12, 3), _rand(1, 12, 3)], lambda b, ids: b.aiOnnx.lstm(ids, 3)
    )


@pytest.mark.follows("test_lstm_torch_grad")
def test_lstm_torch_grad(op_tester):
    def build(builder, ids):
        y, y_h, y_c = builder.aiOnnx.lstm(ids, 3)
        y1 = builder.aiOnnx.add([builder.aiOnnx.squeeze([y], []), y_h])
        return [builder.aiOnnx.add([y1, y_c])]

    op_tester.atol, op_tester.rtol = 1e-06, 1e-04
    check_against_onnx(op_tester, [D1, _rand(1, 12, 3), _rand(1, 12, 3)], build, [0, 1, 2])


@pytest.mark.follows("test_lstm_biases")
def test_lstm_biases(op_tester):
    op_tester.atol = 1e-06
    check_against_onnx(
        op_tester,
        [D1, _rand(1, 20, 3), _rand(1, 20, 5), _rand(1, 40)],
        lambda b, ids: b.aiOnnx.lstm(ids, 3),
    )


@pytest.mark.follows("test_lstm_initial_hc")
def test_lstm_initial_hc(op_tester):
    d1 = np.array([[[1.0, 2.0, 3.0]]]).astype(np.float32)
    inputs = [
        d1,
        _rand(1, 8, 3),
        _rand(1, 8, 2),
        _rand(1, 16),
        np.asarray([1]).astype(np.int32),
        _rand(1, 1, 2),
        _rand(1, 1, 2),
    ]
    op_tester.atol = 1e-06
    check_against_onnx(op_tester, inputs, lambda b, ids: b.aiOnnx.lstm(ids, 3))


@pytest.mark.follows("test_unsupported_activation")
def test_unsupported_activation(op_tester):
    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in (D1, _rand(1, 28, 3), _rand(1, 28, 7))]
        outputs = builder.aiOnnx.lstm(ids, 3, clip=None)
        builder.addNodeAttribute("activations", ["Affine", "Affine", "Affine"], set(outputs))
        builder.addOutputTensor(outputs[1])
        return outputs

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, None, "infer")
    assert "Affine" in e_info.value.args[0]
    assert "not supported" in e_info.value.args[0]


@pytest.mark.follows("test_lstm_explicit_recompute")
def test_lstm_explicit_recompute():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo(D1))
    i2 = builder.addInitializedInputTensor(_rand(1, 28, 3))
    i3 = builder.addInitializedInputTensor(np.zeros((1, 28, 7), np.float32))
    outputs = builder.aiOnnx.lstm([i1, i2, i3], 3, clip=None)
    builder.recomputeOutputInBackwardPass(set(outputs))
    out = builder.aiOnnx.relu([outputs[0]])
    loss = builder.aiGraphcore.identityloss([out])
    builder.addOutputTensor(loss)
    opts = popart.SessionOptions()
    opts.explicitRecomputation = True
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        deviceInfo=create_test_device(DEVICE),
        optimizer=popart.ConstSGD(0.1),
        userOptions=opts,
        loss=loss,
    )
    maingraph = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))["maingraph"]
    assert len([op for op in maingraph if op["type"] == "LSTM"]) == 2
