"""Types and values where PopART's answer is its own: int32 arg indices, ai.graphcore
reshape with 0 and -1, subsample's rounding, ConvTranspose auto_pad, non-spatial
BatchNormalization, and fresh random numbers in every Loop iteration."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from inference_helpers import run_inference
from onnx import TensorProto, helper, numpy_helper
from training_helpers import one_training_step

import popart


@pytest.mark.parametrize("method", ["argmax", "argmin"])
def test_arg_extrema_give_int32_indices(method):
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 3])
    index = getattr(builder.aiOnnx, method)([x], 1, 0)
    builder.addOutputTensor(index)
    value = np.array([[1.0, 3.0, 2.0], [5.0, 4.0, 6.0]], np.float32)
    (result,) = run_inference(builder.getModelProto(), {x: value}, [index])
    assert result.dtype == np.int32  # willow/src/op/argextrema.cpp
    np.testing.assert_array_equal(result, getattr(np, method)(value, axis=1))


def test_graphcore_reshape_resolves_zero_and_minus_one():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 3, 4])
    out = builder.aiGraphcore.reshape([x], [0, -1])
    builder.addOutputTensor(out)
    assert builder.getTensorShape(out) == [2, 12]
    value = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (result,) = run_inference(builder.getModelProto(), {x: value}, [out])
    np.testing.assert_array_equal(result, value.reshape(2, 12))


def test_graphcore_reshape_refuses_what_popart_refuses():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 3, 4])
    out = builder.aiGraphcore.reshape([x], [-1, 5])
    builder.addOutputTensor(out)
    with pytest.raises(popart.popart_exception, match="not whole number"):
        run_inference(builder.getModelProto(), {x: np.zeros((2, 3, 4), np.float32)}, [out])


def test_subsample_keeps_the_partial_last_window_as_poplar_does():
    # willow/src/op/subsample.cpp: out = (in + stride - 1) / stride in the IR, while the
    # Builder's shape inference (willow/src/defs.cpp) rounds down.
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [5, 7])
    out = builder.aiGraphcore.subsample([x], [2, 3])
    builder.addOutputTensor(out)
    assert builder.getTensorShape(out) == [2, 2]
    value = np.arange(35, dtype=np.float32).reshape(5, 7)
    (result,) = run_inference(builder.getModelProto(), {x: value}, [out])
    np.testing.assert_array_equal(result, value[::2, ::3])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize(
    ("strides", "kernel", "extra"),
    [([2, 2], [3, 3], {}), ([2, 2], [4, 4], {}), ([3, 2], [2, 3], {"output_padding": [1, 0]})],
)
def test_conv_transpose_auto_pad_matches_onnxruntime(auto_pad, strides, kernel, extra):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 2, 5, 4)).astype(np.float32)
    w = rng.normal(size=(2, 3, *kernel)).astype(np.float32)
    node = helper.make_node(
        "ConvTranspose", ["x", "w"], ["y"], auto_pad=auto_pad, strides=strides, **extra
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model = onnx.shape_inference.infer_shapes(model)
    reference = onnxruntime.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    (result,) = run_inference(model.SerializeToString(), {"x": x}, ["y"])
    np.testing.assert_allclose(result, reference, rtol=1e-5, atol=1e-5)


def test_non_spatial_batch_normalization_normalises_each_feature():
    rng = np.random.default_rng(0)
    builder = popart.Builder(opsets={"ai.onnx": 7, "ai.graphcore": 1})
    x = builder.addInputTensor("FLOAT", [2, 3, 4, 5])
    params = [rng.uniform(0.5, 1.5, size=(3, 4, 5)).astype(np.float32) for _ in range(4)]
    ids = [builder.addInitializedInputTensor(param) for param in params]
    (y,) = builder.aiOnnx.batchnormalization([x, *ids], 1, spatial=0)
    builder.addOutputTensor(y)
    value = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    (result,) = run_inference(builder.getModelProto(), {x: value}, [y])
    reference = onnxruntime.InferenceSession(builder.getModelProto()).run(None, {x: value})[0]
    np.testing.assert_allclose(result, reference, rtol=1e-5, atol=1e-5)


def test_random_op_in_a_loop_draws_new_numbers_each_iteration():
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x = builder.addInputTensor("FLOAT", [4])
    trips = builder.aiOnnx.constant(np.array(3, np.int64))
    keep_going = builder.aiOnnx.constant(np.array(True))
    body = builder.createSubgraphBuilder()
    body.addInputTensor("INT64", [])
    condition = body.addInputTensor("BOOL", [])
    total = body.addInputTensor("FLOAT", [4])
    draw = body.aiOnnx.randomuniformlike([total])
    body.addOutputTensor(body.aiOnnx.identity([condition]))
    body.addOutputTensor(body.aiOnnx.add([total, draw]))
    body.addOutputTensor(body.aiOnnx.identity([draw]))
    total_out, draws = builder.aiOnnx.loop([trips, keep_going, x], 2, body)
    builder.addOutputTensor(total_out)
    builder.addOutputTensor(draws)
    assert builder.getTensorShape(draws) == [3, 4]  # the constant trip count, as PopART
    result, drawn = run_inference(
        builder.getModelProto(), {x: np.zeros(4, np.float32)}, [total_out, draws]
    )
    assert drawn.shape == (3, 4) and ((drawn >= 0) & (drawn < 1)).all()
    assert len({tuple(row) for row in drawn}) == 3  # a new draw per iteration
    np.testing.assert_allclose(result, drawn.sum(axis=0), rtol=1e-6)


def test_separate_dropouts_and_calls_of_one_subgraph_draw_different_masks():
    # RandomSetup gives each random op, and each CallOp's callee, its own seed
    # (willow/src/transforms/randomsetup.cpp).
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2000])
    first = builder.aiOnnx.dropout([x], 1, 0.5)[0]
    second = builder.aiOnnx.dropout([x], 1, 0.5)[0]
    callee = builder.createSubgraphBuilder()
    argument = callee.addInputTensor("FLOAT", [2000])
    callee.addOutputTensor(callee.aiOnnx.dropout([argument], 1, 0.5)[0])
    (called_once,) = builder.aiGraphcore.call([x], 1, callee)
    (called_twice,) = builder.aiGraphcore.call([x], 1, callee)
    outputs = [first, second, called_once, called_twice]
    total = builder.aiOnnx.sum(outputs)
    weight = builder.addInitializedInputTensor(np.ones(2000, np.float32))
    loss = builder.aiGraphcore.l1loss([builder.aiOnnx.mul([total, weight])], 0.1)
    _, anchors = one_training_step(
        builder.getModelProto(), loss, {x: np.ones(2000, np.float32)}, outputs,
        popart.SGD({"defaultLearningRate": (0.01, False)}),
    )  # fmt: skip
    kept = [anchor != 0 for anchor in anchors]
    for mask in kept:
        assert 0.4 < mask.mean() < 0.6  # ratio 0.5
    # Independent masks agree on about half the elements; equal masks on all of them.
    assert 0.4 < (kept[0] == kept[1]).mean() < 0.6
    assert 0.4 < (kept[2] == kept[3]).mean() < 0.6
