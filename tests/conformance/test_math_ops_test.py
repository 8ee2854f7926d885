"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/math_ops_test.py`.

`ipu.math_ops.serialized_matmul` (forward and gradients, every serialisation dimension,
with and without batch dimensions) against `tf.matmul` on the CPU, `erf` on the IPU
against scipy, and `ipu.math_ops.segment_sum` (its shape checks with the original's
messages, and its values against `tf.math.segment_sum` on the CPU).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import tensorflow as tf
from scipy import special
from tensorflow.python import ipu

v1 = tf.compat.v1

_SERIALIZED_CASES = [
    # (name, a_shape, b_shape, transpose_a, transpose_b, factor, dimension)
    ("a_columns", [8, 16], [16, 5], False, False, 2, "a_columns"),
    ("a_columns_tb", [32, 8], [1, 8], False, True, 2, "a_columns"),
    ("a_columns_ta", [4, 8], [4, 4], True, False, 2, "a_columns"),
    ("a_columns_ta_tb", [64, 32], [128, 64], True, True, 8, "a_columns"),
    ("a_rows_b_columns", [4, 21], [21, 8], False, False, 3, "a_rows_b_columns"),
    ("a_rows_b_columns_tb", [4, 72], [1, 72], False, True, 2, "a_rows_b_columns"),
    ("a_rows_b_columns_ta", [4, 8], [4, 4], True, False, 2, "a_rows_b_columns"),
    ("a_rows_b_columns_ta_tb", [4, 5], [5, 4], True, True, 4, "a_rows_b_columns"),
    ("b_rows", [4, 4], [4, 8], False, False, 2, "b_rows"),
    ("b_rows_tb", [4, 4], [44, 4], False, True, 2, "b_rows"),
    ("b_rows_ta", [4, 8], [4, 4], True, False, 2, "b_rows"),
    ("b_rows_ta_tb", [4, 5], [8, 4], True, True, 4, "b_rows"),
    ("a_columns_serial_factor_1", [4, 5], [5, 4], True, True, 1, "a_columns"),
]


def _all_serialized_cases():
    """The cases, then each with a batch dimension on a, on b, and on both (slow)."""
    cases = list(_SERIALIZED_CASES)
    for suffix, a_batch, b_batch in (("_batch_a", [2], []), ("_batch_b", [], [3]),
                                     ("_batch_a_batch_b", [3], [3])):  # fmt: skip
        for name, a_shape, b_shape, *rest in copy.deepcopy(_SERIALIZED_CASES):
            cases.append((name + suffix, a_batch + a_shape, b_batch + b_shape, *rest))
    # The batched variants repeat the same products: kept for the slow run.
    return [
        pytest.param(*case[1:], id=case[0], marks=[pytest.mark.slow] if "_batch" in case[0] else [])
        for case in cases
    ]


_CASE_ARGS = "a_shape, b_shape, transpose_a, transpose_b, factor, dimension"


@pytest.fixture
def configured(tf1_graph):
    config = ipu.config.IPUConfig()
    config.ipu_model.compile_ipu_code = False
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    yield tf1_graph
    ipu.config.reset_ipu_configuration()


def _on_ipu(model_fn, placeholders, feed, sess, scope_name="ipu_vs"):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        with v1.variable_scope(scope_name, use_resource=True):
            output = ipu.ipu_compiler.compile(model_fn, placeholders)
    ipu.utils.move_variable_initialization_to_cpu()
    sess.run(v1.global_variables_initializer())
    return sess.run(output, feed)


def _on_cpu(model_fn, placeholders, feed, sess):
    with v1.variable_scope("cpu_vs", use_resource=True):
        output = model_fn(*placeholders)
    sess.run(v1.global_variables_initializer())
    return sess.run(output, feed)


@pytest.mark.follows("testSerializedMatmul")
@pytest.mark.parametrize(_CASE_ARGS, _all_serialized_cases())
def test_serialized_matmul(
    configured, a_shape, b_shape, transpose_a, transpose_b, factor, dimension
):
    rng = np.random.default_rng(0xDEADBEEF)
    a = v1.placeholder(np.float32, a_shape)
    b = v1.placeholder(np.float32, b_shape)
    feed = {a: rng.normal(2.0, 2.0, a_shape), b: rng.normal(2.0, 2.0, b_shape)}

    def cpu_matmul(a, b):
        return tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)

    def ipu_matmul(a, b):
        return ipu.math_ops.serialized_matmul(
            a, b, factor, dimension, transpose_a=transpose_a, transpose_b=transpose_b
        )

    with v1.Session() as sess:
        expected = _on_cpu(cpu_matmul, [a, b], feed, sess)
        result = _on_ipu(ipu_matmul, [a, b], feed, sess)
    np.testing.assert_allclose(result[0], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.follows("testSerializedMatmulGrad")
@pytest.mark.parametrize(_CASE_ARGS, _all_serialized_cases())
def test_serialized_matmul_grad(
    configured, a_shape, b_shape, transpose_a, transpose_b, factor, dimension
):
    rng = np.random.default_rng(0xDEADBEEF)
    a_val = tf.constant(rng.normal(2.0, 2.0, a_shape), dtype=np.float32)
    b_val = tf.constant(rng.normal(2.0, 2.0, b_shape), dtype=np.float32)

    def model_fn(matmul_fn):
        def model():
            a = v1.get_variable("a", initializer=a_val)
            b = v1.get_variable("b", initializer=b_val)
            loss = tf.reduce_sum(matmul_fn(a, b))  # Enough to check backpropagation.
            return [*tf.gradients(loss, [a, b]), loss]

        return model

    def matmul(a, b):
        return tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)

    def serialized(a, b):
        return ipu.math_ops.serialized_matmul(
            a, b, factor, dimension, transpose_a=transpose_a, transpose_b=transpose_b
        )

    with v1.Session() as sess:
        expected = _on_ipu(model_fn(matmul), [], {}, sess, "normal")
        result = _on_ipu(model_fn(serialized), [], {}, sess, "serial")
    for got, want in zip(result, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def _run_erf(values):
    with v1.Session() as sess:
        with tf.device("/device:IPU:0"):
            i = v1.placeholder(np.float32, shape=[len(values)])
            result = sess.run(tf.math.erf(i), {i: values})
    np.testing.assert_allclose(result, special.erf(values), rtol=1e-6, atol=1e-6)


@pytest.mark.follows("test")
def test_erf(configured):
    _run_erf(np.linspace(-10, 10, 100, dtype="float32"))


@pytest.mark.follows("testLargeNegative")
def test_erf_large_negative(configured):
    _run_erf(np.linspace(-10000, -3, 100, dtype="float32"))


@pytest.mark.follows("testLargePositive")
def test_erf_large_positive(configured):
    _run_erf(np.linspace(3, 10000, 100, dtype="float32"))


@pytest.mark.follows("testSegmentSumValueErrorWhenDataShapeNotFullyDefined")
def test_segment_sum_data_shape_not_fully_defined(configured):
    data = v1.placeholder(shape=(1, 2, None, 4), dtype=tf.int32)
    with pytest.raises(ValueError, match=r"Shape of data must be fully defined"):
        ipu.math_ops.segment_sum(data, np.arange(20), 20)


@pytest.mark.follows("testSegmentSumValueErrorWhenSegmentIdsShapeNotFullyDefined")
def test_segment_sum_segment_ids_shape_not_fully_defined(configured):
    segment_ids = v1.placeholder(shape=(None,), dtype=tf.int32)
    with pytest.raises(ValueError, match=r"Shape of segment_ids must be fully defined"):
        ipu.math_ops.segment_sum(np.arange(20), segment_ids, 20)


@pytest.mark.follows("testSegmentSumValueErrorWhenDataIsRankZero")
def test_segment_sum_data_is_rank_zero(configured):
    with pytest.raises(ValueError, match=r"Shape \(\) must have rank at least 1"):
        ipu.math_ops.segment_sum(np.ndarray([]), np.arange(20), 20)


@pytest.mark.follows("testSegmentSumValueErrorWhenNumSegmentsIdsAreNotRankOne")
def test_segment_sum_segment_ids_not_rank_one(configured):
    with pytest.raises(ValueError, match=r"Shape \(10, 2\) must have rank 1"):
        ipu.math_ops.segment_sum(np.arange(20), np.arange(20).reshape((10, 2)), 20)


@pytest.mark.follows("testSegmentSumValueErrorWhenNumSegmentsLessThanZero")
def test_segment_sum_num_segments_less_than_zero(configured):
    with pytest.raises(ValueError, match=r"num_segments must be greater than 0; got -123"):
        ipu.math_ops.segment_sum(np.arange(20), np.arange(20), -123)


@pytest.mark.follows("testSegmentSumValueErrorWhenNumSegmentsIsZero")
def test_segment_sum_num_segments_is_zero(configured):
    with pytest.raises(ValueError, match=r"num_segments must be greater than 0; got 0"):
        ipu.math_ops.segment_sum(np.arange(20), np.arange(20), 0)


@pytest.mark.follows("testSegmentSumValueErrorWhenSegmentIdsAndDataIncompatible")
def test_segment_sum_segment_ids_and_data_incompatible(configured):
    with pytest.raises(
        ValueError,
        match=r"segment_ids \(shape \(10,\)\) must have same length as axis 0 of "
        r"data \(shape \(20,\)\)",
    ):
        ipu.math_ops.segment_sum(np.arange(20), np.arange(10), 10)


@pytest.mark.follows("testSegmentSum")
@pytest.mark.parametrize(
    "data_shape",
    [
        (10,),
        (10, 10),
        pytest.param((500, 500), marks=pytest.mark.slow),
        (10, 10, 10),
        pytest.param((75, 75, 75), marks=pytest.mark.slow),
        (4, 4, 4, 4),
        (15, 15, 15, 15),
    ],
)
def test_segment_sum(configured, data_shape):
    rng = np.random.default_rng(0xDEADBEEF)
    data = v1.placeholder(np.float32, data_shape)
    segment_ids = v1.placeholder(np.int32, (data_shape[0],))
    data_val = np.arange(np.prod(data_shape)).reshape(data_shape)
    ids_val = np.sort(rng.integers(0, data_shape[0], (data_shape[0],)))
    num_segments = ids_val[-1] + 1
    feed = {data: data_val, segment_ids: ids_val}
    with v1.Session() as sess:
        expected = _on_cpu(tf.math.segment_sum, [data, segment_ids], feed, sess)
        result = _on_ipu(
            lambda d, s: ipu.math_ops.segment_sum(d, s, num_segments),
            [data, segment_ids],
            feed,
            sess,
        )
    np.testing.assert_allclose(result[0], expected, atol=1e-5, rtol=1e-5)
