"""embedding_ops.embedding_lookup against tf.gather."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import embedding_ops

RNG = np.random.default_rng(2)
PARAMS = RNG.normal(size=(12, 5)).astype(np.float32)
IDS = np.array([[0, 3, 11], [7, 7, 2]], np.int32)


@pytest.mark.parametrize("serialization_factor", [1, 2, 3, 4, 12])
def test_lookup_matches_tf_gather(serialization_factor):
    expected = tf.gather(PARAMS, IDS)
    got = embedding_ops.embedding_lookup(PARAMS, IDS, serialization_factor=serialization_factor)
    np.testing.assert_array_equal(got, expected)
    jitted = tf.function(
        lambda p, i: embedding_ops.embedding_lookup(
            p, i, serialization_factor=serialization_factor
        ),
        jit_compile=True,
    )(PARAMS, IDS)
    np.testing.assert_array_equal(jitted, expected)


@pytest.mark.parametrize("serialization_factor", [1, 3])
def test_lookup_gradient_matches_tf_gather(serialization_factor):
    params = tf.constant(PARAMS)
    upstream = tf.constant(RNG.normal(size=(2, 3, 5)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(params)
        ours = embedding_ops.embedding_lookup(
            params, IDS, serialization_factor=serialization_factor
        )
        reference = tf.gather(params, IDS)
        ours_loss, reference_loss = (
            tf.reduce_sum(ours * upstream),
            tf.reduce_sum(reference * upstream),
        )
    np.testing.assert_allclose(
        tf.convert_to_tensor(tape.gradient(ours_loss, params)),
        tf.convert_to_tensor(tape.gradient(reference_loss, params)),
        rtol=1e-6,
    )


def test_serialized_lookup_of_ids_outside_the_table_gives_zeros():
    got = embedding_ops.embedding_lookup(PARAMS, [1, 12, -1], serialization_factor=2)
    np.testing.assert_array_equal(got[0], PARAMS[1])
    np.testing.assert_array_equal(got[1:], 0)


def test_int64_ids_are_accepted():
    got = embedding_ops.embedding_lookup(PARAMS, tf.constant([4, 5], tf.int64))
    np.testing.assert_array_equal(got, PARAMS[[4, 5]])


@pytest.mark.parametrize("serialization_factor", [2.0, np.int64(2), "2"])
def test_serialization_factor_is_converted_with_int(serialization_factor):
    # The original takes int(serialization_factor).
    got = embedding_ops.embedding_lookup(PARAMS, IDS, serialization_factor=serialization_factor)
    np.testing.assert_array_equal(got, tf.gather(PARAMS, IDS))


def test_serialization_factor_must_divide_the_table():
    with pytest.raises(
        ValueError,
        match=r"The serialization_factor \(5\) must divide the size of the 0th dimension of params \(12\)",
    ):
        embedding_ops.embedding_lookup(PARAMS, IDS, serialization_factor=5)
    with pytest.raises(ValueError, match="serialization_factor has to be at least 1, but was 0"):
        embedding_ops.embedding_lookup(PARAMS, IDS, serialization_factor=0)


def test_ids_must_be_integers():
    with pytest.raises(TypeError, match="ids must be integers, got dtype float32"):
        embedding_ops.embedding_lookup(PARAMS, [1.0])


def test_indices_are_sorted_is_accepted_as_by_the_later_original():
    # tensorflow/python/ipu/ops/embedding_ops.py (r2.6 head) takes indices_are_sorted, a
    # Poplar hint: a program passing it runs, with tf.gather's numbers.
    params = np.arange(12, dtype=np.float32).reshape(6, 2)
    ids = np.array([0, 2, 2, 5], np.int32)
    for factor in (1, 3):
        out = embedding_ops.embedding_lookup(
            params, ids, serialization_factor=factor, indices_are_sorted=True
        )
        np.testing.assert_array_equal(out.numpy(), params[ids])
