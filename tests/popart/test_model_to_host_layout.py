"""modelToHost writes initializers where PopART writes them: in the typed fields
(float_data, int32_data...) of a Builder's model, in raw_data where the model had raw data."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from training_helpers import one_training_step

import popart


def test_builder_model_written_back_in_float_data(tmp_path):
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [3])
    w_value = np.array([1.0, -2.0, 3.0], np.float32)
    w = builder.addInitializedInputTensor(w_value)
    steps = builder.addInitializedInputTensor(np.array([7, 8], np.int32))
    builder.addOutputTensor(steps)
    loss = builder.aiGraphcore.l1loss(
        [builder.aiOnnx.mul([x, w])], 1.0, reduction=popart.ReductionType.Sum
    )
    # PopART's Builder writes the values in float_data and int32_data.
    built = {t.name: t for t in onnx.load_from_string(builder.getModelProto()).graph.initializer}
    assert list(built[w].float_data) == list(w_value) and not built[w].raw_data
    assert list(built[steps].int32_data) == [7, 8]
    x_value = np.array([1.0, 1.0, -1.0], np.float32)
    session = one_training_step(
        builder.getModelProto(), loss, {x: x_value}, optimizer=popart.ConstSGD(0.5)
    )[0]
    path = str(tmp_path / "model.onnx")
    session.modelToHost(path)
    written = {t.name: t for t in onnx.load(path).graph.initializer}
    # d(sum|x*w|)/dw = sign(x*w) * x; one SGD step of 0.5.
    expected = w_value - 0.5 * np.sign(x_value * w_value) * x_value
    np.testing.assert_allclose(np.array(written[w].float_data), expected, rtol=1e-6)
    assert not written[w].raw_data
    assert list(written[steps].int32_data) == [7, 8]


def test_raw_data_model_stays_raw(tmp_path):
    w_value = np.array([2.0, -1.0], np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["y"]),
            helper.make_node("Abs", ["y"], ["a"]),
            helper.make_node("ReduceSum", ["a"], ["loss"], keepdims=0),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        initializer=[numpy_helper.from_array(w_value, "w")],  # raw_data
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    x_value = np.array([1.0, 3.0], np.float32)
    session = one_training_step(
        model.SerializeToString(), "loss", {"x": x_value}, optimizer=popart.ConstSGD(0.5)
    )[0]
    path = str(tmp_path / "model.onnx")
    session.modelToHost(path)
    (written,) = onnx.load(path).graph.initializer
    assert written.raw_data and not written.float_data
    expected = w_value - 0.5 * np.sign(x_value * w_value) * x_value
    np.testing.assert_allclose(numpy_helper.to_array(written), expected, rtol=1e-6)
