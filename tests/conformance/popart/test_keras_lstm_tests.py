"""graphcore/popart tests/integration/operators_test/keras_lstm_tests.py: an ONNX model of a
Keras LSTM layer (the layer's last output; the original's models were exported by
keras2onnx: a Transpose to time-major, an LSTM with the layer's activations, a Squeeze of
Y_h) gives Keras's own result, with each pair of activation (for the cell input and output)
and recurrent activation (for the gates) of relu, sigmoid and tanh, and with the LSTMOp
pattern off and on. The reference here is stock tf_keras's LSTM layer with the same
weights."""

import numpy as np
import onnx
import pytest
import tensorflow as tf
from onnx import helper

import popart

UNITS = 4
FEATURES = 4
STEPS = 4
ONNX_NAMES = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}


def _keras_lstm(activation: str, recurrent_activation: str, seed: int):
    tf.keras.utils.set_random_seed(seed)
    layer = tf.keras.layers.LSTM(
        UNITS, activation=activation, recurrent_activation=recurrent_activation
    )
    model = tf.keras.Sequential([tf.keras.Input((STEPS, FEATURES)), layer])
    return model, layer


def _gates_in_onnx_order(matrix: np.ndarray) -> np.ndarray:
    # Keras stacks the gates i, f, c, o along the last axis; ONNX's LSTM wants i, o, f, c.
    i, f, c, o = np.split(matrix, 4, axis=-1)
    return np.concatenate([i, o, f, c], axis=-1)


def _onnx_model(layer, activation: str, recurrent_activation: str) -> bytes:
    kernel, recurrent_kernel, bias = (w.numpy() for w in layer.weights)
    weights = {
        "lstm_W": _gates_in_onnx_order(kernel).T[np.newaxis],
        "lstm_R": _gates_in_onnx_order(recurrent_kernel).T[np.newaxis],
        "lstm_B": np.concatenate([_gates_in_onnx_order(bias), np.zeros(4 * UNITS)])[
            np.newaxis
        ].astype(np.float32),
    }
    nodes = [
        helper.make_node("Transpose", ["lstm_input"], ["lstm_X"], perm=[1, 0, 2]),
        helper.make_node(
            "LSTM",
            ["lstm_X", "lstm_W", "lstm_R", "lstm_B"],
            ["lstm_Y", "lstm_Y_h", "lstm_Y_c"],
            activations=[ONNX_NAMES[recurrent_activation]] + [ONNX_NAMES[activation]] * 2,
            direction="forward",
            hidden_size=UNITS,
        ),
        helper.make_node("Squeeze", ["lstm_Y_h"], ["lstm"], axes=[0]),
    ]
    graph = helper.make_graph(
        nodes,
        "sequential",
        [helper.make_tensor_value_info("lstm_input", onnx.TensorProto.FLOAT, [1, STEPS, FEATURES])],
        [helper.make_tensor_value_info("lstm", onnx.TensorProto.FLOAT, [1, UNITS])],
        [onnx.numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _compare_with_keras(activation: str, recurrent_activation: str, lstm_op_pattern: bool):
    model, layer = _keras_lstm(activation, recurrent_activation, seed=len(activation) * 7 + 1)
    data = np.random.default_rng(0).random((1, STEPS, FEATURES)).astype(np.float32)
    expected = model(data).numpy()
    proto = _onnx_model(layer, activation, recurrent_activation)
    patterns = popart.Patterns(popart.PatternsLevel.Default)
    patterns.enablePattern("LSTMOp", lstm_op_pattern)
    session = popart.InferenceSession(
        fnModel=proto,
        dataFlow=popart.DataFlow(1, {"lstm": popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"tilesPerIPU": 4}),
        patterns=patterns,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({"lstm_input": data}, anchors))
    assert anchors["lstm"].shape == expected.shape
    np.testing.assert_allclose(anchors["lstm"], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.follows("test_basic")
@pytest.mark.parametrize("lstm_op_pattern", [False, True])
def test_basic(lstm_op_pattern):
    # Keras's defaults: tanh activation, sigmoid recurrent activation.
    _compare_with_keras("tanh", "sigmoid", lstm_op_pattern)


# The original's test_<activation>_<recurrent activation>, one per pair.
@pytest.mark.follows(
    "test_relu_relu",
    "test_relu_sigmoid",
    "test_relu_tanh",
    "test_sigmoid_relu",
    "test_sigmoid_sigmoid",
    "test_sigmoid_tanh",
    "test_tanh_relu",
    "test_tanh_sigmoid",
    "test_tanh_tanh",
)
@pytest.mark.parametrize("lstm_op_pattern", [False, True])
@pytest.mark.parametrize("recurrent_activation", ["relu", "sigmoid", "tanh"])
@pytest.mark.parametrize("activation", ["relu", "sigmoid", "tanh"])
def test_activation_pairs(activation, recurrent_activation, lstm_op_pattern):
    _compare_with_keras(activation, recurrent_activation, lstm_op_pattern)
