"""graphcore/popart tests/integration/operators_test/rnn_test.py: ONNX RNN forward (with
biases, an initial state, Tanh or Relu) and its gradients, against onnx.reference's RNN and
central differences of it; the attributes PopART's RNN refuses (activations it lacks or more
than one, activation_alpha/beta, clip, a direction other than forward, a hidden_size that
does not match the weights); and a session that runs once more giving the same results
(IpuModel2, as the original's CMake)."""

import json

import numpy as np
import pytest
from popart_onnx_reference import check_against_onnx, numeric_gradients

import popart
from conftest import create_test_device

DEVICE = "IpuModel2"
D1 = np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]]).astype(
    np.float32
)
G = popart.reservedGradientPrefix()


def _rand(*shape):
    return np.random.rand(*shape).astype(np.float32)


def _summed(builder, outputs):
    y, y_h = outputs
    return [builder.aiOnnx.add([builder.aiOnnx.squeeze([y], []), y_h])]


@pytest.mark.follows("test_rnn_onnx")
def test_rnn_onnx(op_tester):
    d1 = np.random.randint(0, 20, size=(2, 2, 3)).astype(np.float32)
    op_tester.atol = 1e-06
    check_against_onnx(
        op_tester, [d1, _rand(1, 7, 3), _rand(1, 7, 7)], lambda b, ids: b.aiOnnx.rnn(ids, 2)
    )


@pytest.mark.follows("test_rnn_torch")
def test_rnn_torch(op_tester):
    op_tester.atol = 1e-06
    check_against_onnx(
        op_tester, [D1, _rand(1, 3, 3), _rand(1, 3, 3)], lambda b, ids: b.aiOnnx.rnn(ids, 2)
    )


@pytest.mark.follows("test_rnn_torch_grad")
def test_rnn_torch_grad(op_tester):
    op_tester.atol, op_tester.rtol = 1e-06, 1e-04
    check_against_onnx(
        op_tester,
        [D1, _rand(1, 3, 3), _rand(1, 3, 3)],
        lambda b, ids: _summed(b, b.aiOnnx.rnn(ids, 2)),
        train_inputs=[0, 1, 2],
    )


@pytest.mark.follows("test_rnn_biases_onnx")
def test_rnn_biases_onnx(op_tester):
    d1 = np.random.randint(0, 20, size=(2, 2, 3)).astype(np.float32)
    op_tester.atol = 1e-06
    check_against_onnx(
        op_tester,
        [d1, _rand(1, 5, 3), _rand(1, 5, 5), _rand(1, 10)],
        lambda b, ids: b.aiOnnx.rnn(ids, 2),
    )


@pytest.mark.follows("test_rnn_biases_torch")
def test_rnn_biases_torch(op_tester):
    op_tester.atol = 1e-06
    check_against_onnx(
        op_tester,
        [D1, _rand(1, 3, 3), _rand(1, 3, 3), _rand(1, 6)],
        lambda b, ids: b.aiOnnx.rnn(ids, 2),
    )


def _with_initial_state(hidden):
    return [
        D1,
        _rand(1, hidden, 3),
        _rand(1, hidden, hidden),
        _rand(1, 2 * hidden),
        np.asarray([2, 2]).astype(np.int32),
        _rand(1, 2, hidden),
    ]


@pytest.mark.follows("test_rnn_initial_h_onnx")
def test_rnn_initial_h_onnx(op_tester):
    op_tester.atol = 1e-06
    check_against_onnx(op_tester, _with_initial_state(5), lambda b, ids: b.aiOnnx.rnn(ids, 2))


def _numpy_rnn_summed(x, w, r, activation):
    """squeeze(Y) + Y_h of a forward RNN without biases, in numpy."""
    h = np.zeros((x.shape[1], w.shape[1]))
    ys = []
    for x_t in x:
        h = activation(x_t @ w[0].T + h @ r[0].T)
        ys.append(h)
    return np.stack(ys) + h[None]


@pytest.mark.follows("test_rnn_nondefault_activation")
@pytest.mark.parametrize("activation", ["Tanh", "Relu"])
def test_rnn_nondefault_activation(op_tester, activation):
    # onnx.reference's RNN has only Tanh: numpy is the reference here.
    function = {"Tanh": np.tanh, "Relu": lambda v: np.maximum(v, 0)}[activation]
    arrays = [_rand(2, 2, 3), _rand(1, 3, 3), _rand(1, 3, 3)]

    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in arrays]
        outputs = builder.aiOnnx.rnn(ids, 2)
        builder.addNodeAttribute("activations", [activation], set(outputs))
        (y1,) = _summed(builder, outputs)
        builder.addOutputTensor(y1)
        init_builder.ids = ids
        return [y1, G + y1, *(G + i for i in ids)]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        feeds = dict(zip(init_builder.ids, arrays, strict=True))

        def forward(values):
            return _numpy_rnn_summed(*(values[i] for i in init_builder.ids), function)

        grads = numeric_gradients(forward, feeds, d__o, init_builder.ids)
        return [forward(feeds).astype(np.float32), d__o, *grads]

    op_tester.atol, op_tester.rtol = 1e-06, 1e-04
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_rnn_torch_grad_all_inputs")
def test_rnn_torch_grad_all_inputs(op_tester):
    op_tester.atol, op_tester.rtol = 1e-06, 1e-04
    check_against_onnx(
        op_tester,
        _with_initial_state(2),
        lambda b, ids: _summed(b, b.aiOnnx.rnn(ids, 2)),
        train_inputs=[0, 1, 2, 3, 5],
    )


@pytest.mark.follows("test_rnn_outlining")
def test_rnn_outlining(op_tester):
    def init_builder(builder):
        x = builder.addInputTensor(D1)
        w = builder.addInitializedInputTensor(_rand(1, 3, 3))
        r = builder.addInitializedInputTensor(np.zeros((1, 3, 3), np.float32))
        for _ in range(4):
            y = builder.aiOnnx.rnn([x, w, r], 2)[0]
            x = builder.aiOnnx.squeeze([y], axes=[1])
        y = builder.aiOnnx.identity([y])
        builder.addOutputTensor(y)
        return [y]

    session = op_tester.run(init_builder, lambda _: [None], "train")
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    assert not [op for op in ir["maingraph"] if op["type"] == "RNN"]
    assert len([op for graph in ir.values() for op in graph if op["type"] == "RNN"]) == 1


def _refused(op_tester, attribute, value, num_outputs=1):
    """Running an RNN whose node carries `attribute=value` raises; returns the message."""

    def init_builder(builder):
        ids = [builder.addInputTensor(a) for a in (np.array([[[1.0]]], np.float32),)]
        ids += [builder.addInputTensor(_rand(1, 1, 1)), builder.addInputTensor(_rand(1, 1, 1))]
        outputs = builder.aiOnnx.rnn(ids, num_outputs)
        builder.addNodeAttribute(attribute, value, set(outputs))
        builder.addOutputTensor(outputs[-1])
        return outputs

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, None, "infer")
    return e_info.value.args[0]


@pytest.mark.follows("test_rnn_unsupported_activation")
def test_rnn_unsupported_activation(op_tester):
    message = _refused(op_tester, "activations", ["Affine"], num_outputs=2)
    assert "Affine" in message and "not supported" in message


@pytest.mark.follows("test_rnn_bad_number_of_activations")
def test_rnn_bad_number_of_activations(op_tester):
    assert "only supports 1 activation" in _refused(op_tester, "activations", [])


@pytest.mark.follows("test_rnn_wrong_hidden_size")
def test_rnn_wrong_hidden_size(op_tester):
    message = _refused(op_tester, "hidden_size", 2)
    assert "hidden_size" in message and "does not match" in message


def _accepted(op_tester, attribute, value):
    d = [np.array([[[1.0]]], np.float32), _rand(1, 1, 1), _rand(1, 1, 1)]

    def build(builder, ids):
        outputs = builder.aiOnnx.rnn(ids, 1)
        builder.addNodeAttribute(attribute, value, set(outputs))
        return outputs

    op_tester.atol = 1e-06
    check_against_onnx(op_tester, d, build)


@pytest.mark.follows("test_rnn_correct_hidden_size")
def test_rnn_correct_hidden_size(op_tester):
    _accepted(op_tester, "hidden_size", 1)


@pytest.mark.follows("test_rnn_activation_alpha_error")
def test_rnn_activation_alpha_error(op_tester):
    message = _refused(op_tester, "activation_alpha", [1.0])
    assert "activation_alpha" in message and "not supported" in message


@pytest.mark.follows("test_rnn_activation_beta_error")
def test_rnn_activation_beta_error(op_tester):
    message = _refused(op_tester, "activation_beta", [1.0])
    assert "activation_beta" in message and "not supported" in message


@pytest.mark.follows("test_rnn_clip_error")
def test_rnn_clip_error(op_tester):
    message = _refused(op_tester, "clip", 1.0)
    assert "clip" in message and "not supported" in message


@pytest.mark.follows("test_rnn_direction_error")
def test_rnn_direction_error(op_tester):
    message = _refused(op_tester, "direction", "bidirectional")
    assert "only supports" in message and "forward" in message


@pytest.mark.follows("test_rnn_forward_direction")
def test_rnn_forward_direction(op_tester):
    _accepted(op_tester, "direction", "forward")


@pytest.mark.follows("test_rnn_uninitialised_tensors")
def test_rnn_uninitialised_tensors():
    """A session that ran once on other data gives, on the data that matters, what a fresh
    session gives."""
    seq_length, batch_size, size = 3, 2, 2
    shapes = [[seq_length, batch_size, size], [1, size, size], [1, size, size], [1, 2 * size]]
    builder = popart.Builder()
    ids = [builder.addInputTensor(popart.TensorInfo("FLOAT", s)) for s in shapes]
    ids.append(builder.addInputTensor(popart.TensorInfo("INT32", [batch_size])))
    ids.append(builder.addInputTensor(popart.TensorInfo("FLOAT", [1, batch_size, size])))
    y, y_h = builder.aiOnnx.rnn(ids, 2)
    y1 = builder.aiOnnx.add([builder.aiOnnx.squeeze([y], []), y_h])
    loss = builder.aiGraphcore.identityloss([y1])
    proto = builder.getModelProto()
    anchors = [loss, y, y_h, y1, G + y1, *(G + ids[i] for i in (0, 1, 2, 3, 5))]
    data_flow = popart.DataFlow(1, {a: popart.AnchorReturnType("ALL") for a in anchors})

    def feeds():
        arrays = [_rand(*s) for s in shapes]
        arrays += [np.asarray([seq_length] * batch_size, np.int32), _rand(1, batch_size, size)]
        return dict(zip(ids, arrays, strict=True))

    def init_session():
        session = popart.TrainingSession(
            fnModel=proto,
            dataFlow=data_flow,
            userOptions=popart.SessionOptions(),
            loss=loss,
            optimizer=popart.SGD({"defaultLearningRate": (0.1, True)}),
            deviceInfo=create_test_device(DEVICE),
        )
        session.prepareDevice()
        session.weightsFromHost()
        return session, session.initAnchorArrays()

    ignored, wanted = feeds(), feeds()
    session1, anchors1 = init_session()
    session1.run(popart.PyStepIO(ignored, anchors1))
    session1.run(popart.PyStepIO(wanted, anchors1))
    session2, anchors2 = init_session()
    session2.run(popart.PyStepIO(wanted, anchors2))
    for name in anchors1:
        assert np.allclose(anchors1[name], anchors2[name])
