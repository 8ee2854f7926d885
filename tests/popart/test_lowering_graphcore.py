"""The ai.graphcore (PopART custom op) lowerings against numpy references."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from onnx import TensorProto, helper, numpy_helper

from openipu._src.popart.lowering import lower_model

RNG = np.random.default_rng(0)


def run_graphcore(op_type, inputs, num_outputs=1, training=False, **attributes):
    """Run one ai.graphcore node on numpy inputs; returns its outputs as numpy arrays."""
    input_names = [f"in{i}" for i in range(len(inputs))]
    output_names = [f"out{i}" for i in range(num_outputs)]
    node = helper.make_node(op_type, input_names, output_names, domain="ai.graphcore", **attributes)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape
            )
            for name, value in zip(input_names, inputs, strict=True)
        ],
        [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None) for name in output_names],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid("ai.graphcore", 1)]
    )
    results = lower_model(model).run(dict(zip(input_names, inputs, strict=True)), training=training)
    return [results[name].numpy() for name in output_names]


def test_elementwise_ops():
    a = np.array([5.0, -5.0, 7.5], np.float32)
    b = np.array([3.0, 3.0, -2.0], np.float32)
    np.testing.assert_allclose(run_graphcore("Fmod", [a, b])[0], np.fmod(a, b))
    np.testing.assert_allclose(run_graphcore("Remainder", [a, b])[0], np.remainder(a, b))
    np.testing.assert_allclose(run_graphcore("Atan2", [a, b])[0], np.arctan2(a, b), rtol=1e-6)
    np.testing.assert_allclose(run_graphcore("Scale", [a], scale=2.5)[0], a * 2.5)
    np.testing.assert_allclose(
        run_graphcore("ScaledAdd", [a, b], scale0=2.0, scale1=-1.0)[0], 2 * a - b
    )
    np.testing.assert_allclose(
        run_graphcore("IncrementMod", [a], increment=1.0, modulus=4.0)[0], np.mod(a + 1, 4)
    )
    np.testing.assert_allclose(run_graphcore("Swish", [a])[0], a / (1 + np.exp(-a)), rtol=1e-6)
    halves = np.array([0.5, 1.5, 2.5, -0.5], np.float32)
    np.testing.assert_array_equal(run_graphcore("Round", [halves])[0], [0.0, 2.0, 2.0, -0.0])
    ints = np.array([0b1100, 0b1010], np.int32)
    np.testing.assert_array_equal(
        run_graphcore("BitwiseXnor", [ints, ints[::-1].copy()])[0], ~(ints ^ ints[::-1])
    )


def test_gelu_is_the_tanh_approximation_and_geluerf_exact():
    x = np.linspace(-3, 3, 7).astype(np.float32)
    tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(run_graphcore("Gelu", [x])[0], tanh_form, rtol=1e-5, atol=1e-6)
    from math import erf

    exact = np.array([0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x], np.float32)
    np.testing.assert_allclose(run_graphcore("GeluErf", [x])[0], exact, rtol=1e-5, atol=1e-6)


def test_nllloss_reductions_and_ignore_index():
    probabilities = RNG.dirichlet(np.ones(4), size=5).astype(np.float32)
    labels = np.array([0, 3, 1, 2, 3], np.int32)
    picked = -np.log(probabilities[np.arange(5), labels])
    (mean,) = run_graphcore("Nll", [probabilities, labels], reduction="Mean")
    np.testing.assert_allclose(mean, picked.mean(), rtol=1e-6)
    (none,) = run_graphcore("Nll", [probabilities, labels], reduction="None")
    np.testing.assert_allclose(none, picked, rtol=1e-6)
    (ignored,) = run_graphcore("Nll", [probabilities, labels], reduction="Mean", ignoreIndex=3)
    np.testing.assert_allclose(ignored, picked[labels != 3].sum() / 3, rtol=1e-6)
    (log_input,) = run_graphcore(
        "Nll", [np.log(probabilities), labels], reduction="Sum", inputIsLogProbability=1
    )
    np.testing.assert_allclose(log_input, picked.sum(), rtol=1e-5)


def test_nllloss_of_labels_outside_the_classes_takes_a_probability_of_zero():
    # The original's one-hot row of such a label is all zeros (poplibs EncodeOneHot), so
    # p is 0 and the loss -log(max(0, 1e-7)); the original's prefetch_test feeds labels up
    # to 19 for 8 classes.
    probabilities = RNG.dirichlet(np.ones(4), size=4).astype(np.float32)
    labels = np.array([1, 4, -1, 2], np.int32)
    (none,) = run_graphcore("Nll", [probabilities, labels], reduction="None")
    expected = np.full(4, -np.log(np.float32(1e-7)), np.float32)
    expected[[0, 3]] = -np.log(probabilities[[0, 3], [1, 2]])
    np.testing.assert_allclose(none, expected, rtol=1e-6)


def test_l1_and_identity_losses():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    l1 = run_graphcore("L1", [x], reduction="Sum", **{"lambda": 0.5})[0]
    np.testing.assert_allclose(l1, 0.5 * np.abs(x).sum(), rtol=1e-6)
    np.testing.assert_allclose(
        run_graphcore("IdentityLoss", [x], reduction="Mean")[0], x.mean(), rtol=1e-6
    )


def test_dynamic_slice_update_add_zero():
    tensor = np.arange(24, dtype=np.float32).reshape(4, 6)
    offset = np.array([1, 2], np.uint32)
    kwargs = {"axes": [0, 1], "sizes": [2, 3]}
    (piece,) = run_graphcore("DynamicSlice", [tensor, offset], **kwargs)
    np.testing.assert_array_equal(piece, tensor[1:3, 2:5])
    update = -np.ones((2, 3), np.float32)
    (updated,) = run_graphcore("DynamicUpdate", [tensor, offset, update], **kwargs)
    expected = tensor.copy()
    expected[1:3, 2:5] = -1
    np.testing.assert_array_equal(updated, expected)
    (added,) = run_graphcore("DynamicAdd", [tensor, offset, update], **kwargs)
    expected = tensor.copy()
    expected[1:3, 2:5] -= 1
    np.testing.assert_array_equal(added, expected)
    (zeroed,) = run_graphcore("DynamicZero", [tensor, offset], **kwargs)
    expected = tensor.copy()
    expected[1:3, 2:5] = 0
    np.testing.assert_array_equal(zeroed, expected)


def test_scatterreduce_sum_and_max():
    source = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    index = np.array([[0, 2, 0, 1]], np.int32)
    (summed,) = run_graphcore("ScatterReduce", [source, index], axis_size=3, axis=1, reduction=0)
    np.testing.assert_array_equal(summed, [[4.0, 4.0, 2.0]])
    (largest,) = run_graphcore("ScatterReduce", [source, index], axis_size=3, axis=1, reduction=1)
    np.testing.assert_array_equal(largest, [[3.0, 4.0, 2.0]])


def test_reducemedian_takes_the_lower_median():
    x = np.array([[4.0, 1.0, 3.0, 2.0], [9.0, 7.0, 8.0, 6.0]], np.float32)
    values, indices = run_graphcore("ReduceMedian", [x], num_outputs=2, axes=[1], keepdims=0)
    np.testing.assert_array_equal(values, [2.0, 7.0])
    np.testing.assert_array_equal(indices, [3, 1])


def test_groupnormalization_matches_numpy():
    x = RNG.normal(size=(2, 4, 3)).astype(np.float32)
    scale = RNG.normal(size=4).astype(np.float32)
    bias = RNG.normal(size=4).astype(np.float32)
    y, mean, inv_std = run_graphcore(
        "GroupNormalization", [x, scale, bias], num_outputs=3, num_groups=2, epsilon=1e-5
    )
    grouped = x.reshape(2, 2, -1)
    expected_mean = grouped.mean(-1)
    expected_variance = grouped.var(-1)
    normalized = (grouped - expected_mean[..., None]) / np.sqrt(expected_variance[..., None] + 1e-5)
    expected = normalized.reshape(x.shape) * scale[None, :, None] + bias[None, :, None]
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mean, expected_mean.reshape(-1), rtol=1e-5, atol=1e-6)
    # The third output is the inverse standard deviation (willow/src/popx/op/groupnormx.cpp).
    expected_inv_std = 1 / np.sqrt(expected_variance.reshape(-1) + 1e-5)
    np.testing.assert_allclose(inv_std, expected_inv_std, rtol=1e-4)


def test_batchnormalization_running_variance_is_unbiased_in_training():
    x = RNG.normal(size=(4, 2, 3)).astype(np.float32)
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    _, running_mean, running_variance, _, _ = run_graphcore(
        "BatchNormalization",
        [x, ones, zeros, zeros, ones],
        num_outputs=5,
        training=True,
        epsilon=1e-5,
        momentum=0.9,
    )
    batch = x.transpose(1, 0, 2).reshape(2, -1)
    np.testing.assert_allclose(running_mean, 0.1 * batch.mean(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(running_variance, 0.9 + 0.1 * batch.var(-1, ddof=1), rtol=1e-5)


def test_shapes_and_slicing():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(run_graphcore("Reshape", [x], shape=[6, 4])[0], x.reshape(6, 4))
    np.testing.assert_array_equal(
        run_graphcore("Reverse", [x], dimensions=[0, 2])[0], x[::-1, :, ::-1]
    )
    np.testing.assert_array_equal(
        run_graphcore("Slice", [x], starts=[1], ends=[3], axes=[2])[0], x[:, :, 1:3]
    )
    np.testing.assert_array_equal(
        run_graphcore("Subsample", [x], strides=[1, 2, 3])[0], x[::1, ::2, ::3]
    )
    values, indices = run_graphcore("Sort", [x[0, ::-1]], num_outputs=2, axis=0)
    np.testing.assert_array_equal(values, np.sort(x[0, ::-1], axis=0))


def test_sequenceslice_copies_rows_and_stops_at_a_zero_count():
    source = np.arange(12, dtype=np.float32).reshape(6, 2)
    destination = -np.ones((5, 2), np.float32)
    counts = np.array([2, 1, 0, 3], np.uint32)
    source_offsets = np.array([0, 4, 0, 0], np.uint32)
    destination_offsets = np.array([3, 0, 0, 1], np.uint32)
    (result,) = run_graphcore(
        "SequenceSlice",
        [source, destination, counts, source_offsets, destination_offsets],
        zeroUnused=1,
    )
    expected = np.zeros((5, 2), np.float32)
    expected[3:5] = source[0:2]
    expected[0:1] = source[4:5]
    np.testing.assert_array_equal(result, expected)


def test_detach_stops_gradients_and_init_makes_zeros():
    node = helper.make_node("Detach", ["w"], ["d"], domain="ai.graphcore")
    mul = helper.make_node("Mul", ["w", "d"], ["y"])
    graph = helper.make_graph(
        [node, mul],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid("ai.graphcore", 1)]
    )
    lowered = lower_model(model)
    w = tf.Variable(lowered.initializers["w"])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(lowered.run({}, {"w": w})["y"])
    np.testing.assert_array_equal(tape.gradient(loss, w).numpy(), [1.0, 2.0])
    (zeros,) = run_graphcore("Init", [], shape=[2, 3], data_type=9, init_type=1, batch_axis=-1)
    np.testing.assert_array_equal(zeros, np.zeros((2, 3), np.float32))


def test_shaped_dropout_is_identity_in_inference():
    x = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(
        run_graphcore("ShapedDropout", [x], shape=[4, 1], ratio=0.5)[0], x
    )
    (dropped,) = run_graphcore("ShapedDropout", [x], training=True, shape=[4, 1], ratio=0.5)
    # One mask value per row, broadcast along the row.
    assert all(len(set(row)) == 1 for row in dropped.tolist())


def test_bad_loss_reduction_is_an_attribute_error():
    from openipu._src.popart.errors import InvalidAttributeError

    with pytest.raises(InvalidAttributeError, match="reduction"):
        run_graphcore("IdentityLoss", [np.ones(2, np.float32)], reduction="Median")
