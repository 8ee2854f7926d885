"""Chains of spatial ops are computed channels-last: the same numbers as onnxruntime and
onnx.reference, with the data transposed once where a chain starts and once where a value
leaves it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tensorflow as tf
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from openipu._src.popart.lowering import lower_model


def weight(rng, name, *shape):
    return numpy_helper.from_array(rng.normal(size=shape).astype(np.float32) * 0.5, name)


def residual_model() -> onnx.ModelProto:
    """Conv-BN-Relu, a residual Add, a broadcast Mul, pools, a flatten and a side output."""
    rng = np.random.default_rng(0)
    initializers = [
        weight(rng, "w1", 4, 3, 3, 3),
        weight(rng, "b1", 4),
        weight(rng, "w2", 4, 4, 3, 3),
        numpy_helper.from_array(np.abs(rng.normal(size=4)).astype(np.float32) + 0.5, "scale"),
        weight(rng, "bias", 4),
        weight(rng, "mean", 4),
        numpy_helper.from_array(np.abs(rng.normal(size=4)).astype(np.float32) + 0.5, "var"),
        weight(rng, "gate", 4, 1, 1),  # broadcasts over H and W (channels-first)
    ]
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c2", "scale", "bias", "mean", "var"], ["n2"]),
        node("Add", ["n2", "r1"], ["sum"]),
        node("Mul", ["sum", "gate"], ["gated"]),
        node("MaxPool", ["gated"], ["pooled"], kernel_shape=[2, 2], strides=[2, 2]),
        node(
            "AveragePool",
            ["pooled"],
            ["averaged"],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            count_include_pad=0,
        ),
        node("GlobalAveragePool", ["averaged"], ["global"]),
        node("Flatten", ["global"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "residual",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("averaged", TensorProto.FLOAT, [2, 4, 4, 4]),
        ],
        initializer=initializers,
    )
    # IR version 8: what onnxruntime reads.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_chain_matches_onnxruntime_with_intermediate_values():
    """(onnx.reference's BatchNormalization-13 gives other numbers than onnxruntime's.)"""
    onnxruntime = pytest.importorskip("onnxruntime")
    model = residual_model()
    fetch = ["r1", "sum", "pooled"]
    with_fetched = onnx.ModelProto()
    with_fetched.CopyFrom(model)
    with_fetched.graph.output.extend(
        helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in fetch
    )
    runtime = onnxruntime.InferenceSession(
        with_fetched.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    x = np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype(np.float32)
    results = lower_model(model).run({"x": x}, fetch=fetch)
    expected = runtime.run(["y", "averaged", *fetch], {"x": x})
    for name, value in zip(["y", "averaged", *fetch], expected, strict=True):
        np.testing.assert_allclose(results[name].numpy(), value, rtol=1e-4, atol=1e-4)


def test_chain_is_transposed_only_at_its_edges():
    lowered = lower_model(residual_model())
    function = tf.function(lambda x: lowered.run({"x": x})["y"])
    concrete = function.get_concrete_function(tf.TensorSpec([2, 3, 8, 8]))
    # Transposes of batch data (N = 2, not weights or broadcast constants) that y needs:
    # x into the chain, and the global average out of it, to Flatten.
    data_transposes = [
        op
        for op in _ops_feeding(concrete)
        if op.type == "Transpose" and op.inputs[0].shape.as_list()[0] == 2
    ]
    assert sorted(op.outputs[0].shape.as_list() for op in data_transposes) == [
        [2, 4, 1, 1],
        [2, 8, 8, 3],
    ]


def _ops_feeding(concrete) -> set:
    pending = [tensor.op for tensor in concrete.outputs]
    seen = set()
    while pending:
        op = pending.pop()
        if op not in seen:
            seen.add(op)
            pending.extend(tensor.op for tensor in op.inputs)
    return seen


def test_elementwise_op_on_a_channels_last_value_and_a_lower_rank_one():
    """A [C] vector broadcasts against the last (W) axis in ONNX: not the channels."""
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Add", ["c", "v"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 5])],
        initializer=[weight(rng, "w", 3, 2, 1, 1), weight(rng, "v", 5)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = rng.normal(size=(1, 2, 5, 5)).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(
        lower_model(model).run({"x": x})["y"].numpy(), expected, rtol=1e-5, atol=1e-5
    )
