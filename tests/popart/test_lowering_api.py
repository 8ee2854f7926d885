"""The lowering's entry point: registry lookup, errors, weights as arguments, fetch, XLA, seeds."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tensorflow as tf
from onnx import TensorProto, helper, numpy_helper

from openipu._src.popart.errors import (
    InvalidAttributeError,
    LoweringError,
    UnsupportedOpError,
    popart_exception,
)
from openipu._src.popart.lowering import find_op, lower_model
from openipu._src.popart.lowering.ops.activation import Softmax


def make_model(nodes, inputs, outputs, initializers=(), opset=11, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *extra_opsets]
    return helper.make_model(graph, opset_imports=opsets)


def tensor(name, shape, elem_type=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem_type, shape)


def mlp_model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.zeros(3, np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
        helper.make_node("Add", ["h", "b"], ["logits"], name="add"),
        helper.make_node("Relu", ["logits"], ["y"], name="relu"),
    ]
    return make_model(nodes, [tensor("x", [2, 4])], [tensor("y", [2, 3])], [w, b])


def test_lookup_picks_newest_registration_not_above_the_opset():
    assert find_op("", "Softmax", 12)[0] == 11
    assert find_op("", "Softmax", 18)[0] == 13
    assert find_op("", "Softmax", 18)[1] is Softmax
    assert find_op("ai.onnx", "Relu", 28) is not None
    assert find_op("", "Softmax", 0) is None


def test_lowered_graph_describes_inputs_outputs_and_initializers():
    lowered = lower_model(mlp_model())
    assert lowered.input_names == ["x"]
    assert lowered.output_names == ["y"]
    assert set(lowered.initializers) == {"w", "b"}
    assert lowered.inputs[0].dtype == tf.float32 and lowered.inputs[0].shape == (2, 4)
    assert lowered.compilable
    assert {"h", "logits", "y"} <= set(lowered.tensor_names())


def test_weights_are_arguments_and_differentiable():
    lowered = lower_model(mlp_model())
    weights = {name: tf.Variable(value) for name, value in lowered.initializers.items()}
    x = np.ones((2, 4), np.float32)
    with tf.GradientTape() as tape:
        y = lowered.run({"x": x}, weights)["y"]
        loss = tf.reduce_sum(y)
    gradients = tape.gradient(loss, weights)
    assert gradients["w"] is not None and gradients["b"] is not None
    expected = np.maximum(x @ lowered.initializers["w"], 0)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)


def test_missing_weights_default_to_the_initializer_values():
    lowered = lower_model(mlp_model())
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(
        lowered.run({"x": x})["y"].numpy(),
        np.maximum(x @ lowered.initializers["w"], 0),
        rtol=1e-6,
    )


def test_fetch_returns_intermediate_tensors():
    lowered = lower_model(mlp_model())
    results = lowered.run({"x": np.ones((2, 4), np.float32)}, fetch=["h", "w"])
    assert set(results) == {"y", "h", "w"}
    with pytest.raises(popart_exception, match="nope"):
        lowered.run({"x": np.ones((2, 4), np.float32)}, fetch=["nope"])


def test_missing_input_is_reported():
    with pytest.raises(popart_exception, match="input 'x'"):
        lower_model(mlp_model()).run({})


def test_compiles_with_xla_and_matches_eager():
    lowered = lower_model(mlp_model())
    weights = {name: tf.constant(value) for name, value in lowered.initializers.items()}
    x = tf.constant(np.random.default_rng(1).normal(size=(2, 4)).astype(np.float32))
    compiled = tf.function(lambda x, w: lowered.run({"x": x}, w)["y"], jit_compile=True)
    # XLA may fuse the matmul and bias differently from the eager kernels: float32 rounding.
    np.testing.assert_allclose(
        compiled(x, weights).numpy(), lowered.run({"x": x}, weights)["y"], rtol=1e-6
    )


def test_shape_arithmetic_is_folded_so_reshape_compiles():
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch"], ["batch1"], axes=[0]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    constants = [
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
    ]
    model = make_model(nodes, [tensor("x", [2, 3, 4])], [tensor("y", [2, 12])], constants)
    lowered = lower_model(model)
    compiled = tf.function(lambda x: lowered.run({"x": x})["y"], jit_compile=True)
    assert compiled(tf.zeros([2, 3, 4])).shape == (2, 12)


def test_unknown_op_names_type_domain_version_and_node():
    model = make_model(
        [helper.make_node("FancyOp", ["x"], ["y"], name="fancy_node", domain="my.domain")],
        [tensor("x", [1])],
        [tensor("y", [1])],
        extra_opsets=[helper.make_opsetid("my.domain", 3)],
    )
    with pytest.raises(UnsupportedOpError) as error:
        lower_model(model)
    message = str(error.value)
    assert "FancyOp" in message and "my.domain" in message and "3" in message
    assert "fancy_node" in message


def test_op_from_a_newer_opset_than_implemented_is_unsupported():
    model = make_model(
        [helper.make_node("Softmax", ["x"], ["y"], name="sm")],
        [tensor("x", [1])],
        [tensor("y", [1])],
        opset=1,
    )
    model.opset_import[0].version = 0
    with pytest.raises(UnsupportedOpError, match="Softmax"):
        lower_model(model)


def test_bad_attribute_names_node_and_attribute():
    model = make_model(
        [helper.make_node("Gelu", ["x"], ["y"], name="gelu_node", approximate="cubic")],
        [tensor("x", [1])],
        [tensor("y", [1])],
        opset=20,
    )
    with pytest.raises(InvalidAttributeError, match="gelu_node.*approximate"):
        lower_model(model)
    unknown = make_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu_node", slope=2.0)],
        [tensor("x", [1])],
        [tensor("y", [1])],
    )
    with pytest.raises(InvalidAttributeError, match="relu_node.*slope"):
        lower_model(unknown)


def test_popart_annotation_attributes_are_accepted():
    node = helper.make_node("Relu", ["x"], ["y"], __pipeline_stage=1)
    model = make_model([node], [tensor("x", [2])], [tensor("y", [2])])
    result = lower_model(model).run({"x": np.array([-1.0, 2.0], np.float32)})["y"]
    np.testing.assert_array_equal(result.numpy(), [0.0, 2.0])


def test_undefined_tensor_is_reported_with_the_node():
    model = make_model(
        [helper.make_node("Relu", ["nowhere"], ["y"], name="r")],
        [tensor("x", [1])],
        [tensor("y", [1])],
    )
    with pytest.raises(LoweringError, match="'r'.*nowhere"):
        lower_model(model)


def dropout_model(opset=11):
    node = helper.make_node("Dropout", ["x"], ["y"], ratio=0.5)
    return make_model([node], [tensor("x", [100])], [tensor("y", [100])], opset=opset)


def test_dropout_is_identity_in_inference_and_seeded_in_training():
    lowered = lower_model(dropout_model())
    x = np.ones(100, np.float32)
    np.testing.assert_array_equal(lowered.run({"x": x})["y"].numpy(), x)
    first = lowered.run({"x": x}, training=True, seed=7)["y"].numpy()
    again = lowered.run({"x": x}, training=True, seed=7)["y"].numpy()
    other = lowered.run({"x": x}, training=True, seed=8)["y"].numpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert set(np.unique(first)) <= {0.0, 2.0}
    compiled = tf.function(
        lambda x: lowered.run({"x": x}, training=True, seed=7)["y"], jit_compile=True
    )
    np.testing.assert_array_equal(compiled(tf.constant(x)).numpy(), first)


def test_non_compilable_ops_are_declared():
    node = helper.make_node("NonZero", ["x"], ["y"], name="nz")
    model = make_model([node], [tensor("x", [3])], [tensor("y", None, TensorProto.INT64)])
    lowered = lower_model(model)
    assert not lowered.compilable
    assert lowered.non_compilable_ops == ["NonZero (nz)"]


def test_model_local_functions_are_inlined():
    function = helper.make_function(
        "custom",
        "DoubleRelu",
        ["a"],
        ["b"],
        [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Add", ["r", "r"], ["b"])],
        [helper.make_opsetid("", 13)],
    )
    graph = helper.make_graph(
        [helper.make_node("DoubleRelu", ["x"], ["y"], domain="custom")],
        "g",
        [tensor("x", [2])],
        [tensor("y", [2])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("custom", 1)],
        functions=[function],
    )
    result = lower_model(model).run({"x": np.array([-1.0, 3.0], np.float32)})["y"]
    np.testing.assert_array_equal(result.numpy(), [0.0, 6.0])


def test_lower_model_rejects_non_models():
    with pytest.raises(LoweringError):
        lower_model(onnx.GraphProto())
