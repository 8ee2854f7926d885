"""cross_replica_ops against numpy sums over consecutive replica groups, on 1, 2 and 4 replicas."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import cross_replica_ops

RNG = np.random.default_rng(11)
DATA = RNG.normal(size=(4, 2, 3)).astype(np.float32)

GROUPINGS = [(1, None), (1, 1), (2, None), (2, 1), (2, 2), (4, None), (4, 1), (4, 2), (4, 4)]


def grouped(values, replicas, group_size, reduce):
    group_size = group_size or replicas
    return [
        reduce(values[(r // group_size) * group_size : (r // group_size + 1) * group_size])
        for r in range(replicas)
    ]


@pytest.mark.parametrize("replicas, group_size", GROUPINGS)
def test_sum_and_mean_within_groups(run_on_replicas, replicas, group_size):
    def fn(replica):
        x = tf.constant(DATA[replica])
        return (
            cross_replica_ops.cross_replica_sum(x, replica_group_size=group_size),
            cross_replica_ops.cross_replica_mean(x, replica_group_size=group_size),
        )

    got = run_on_replicas(fn, replicas)
    sums = grouped(DATA, replicas, group_size, lambda v: v.sum(axis=0))
    means = grouped(DATA, replicas, group_size, lambda v: v.mean(axis=0))
    for r in range(replicas):
        np.testing.assert_allclose(got[r][0], sums[r], rtol=1e-6)
        np.testing.assert_allclose(got[r][1], means[r], rtol=1e-6)


@pytest.mark.parametrize("group_size", [np.int64(2), 2.0, 2.5])
def test_a_group_size_works_as_the_original_s_int_attribute(run_on_replicas, group_size):
    # TensorFlow converts an int attribute with int(): NumPy ints, 2.0 and 2.5 are 2.
    def fn(replica):
        x = tf.constant(DATA[replica])
        return cross_replica_ops.cross_replica_sum(x, replica_group_size=group_size)

    got = run_on_replicas(fn, 4)
    sums = grouped(DATA, 4, 2, lambda v: v.sum(axis=0))
    for r in range(4):
        np.testing.assert_allclose(got[r], sums[r], rtol=1e-6)


@pytest.mark.parametrize("replicas, group_size", [(1, None), (2, None), (4, 2)])
def test_compiled_equals_eager_build(run_on_replicas, replicas, group_size):
    def fn(replica):
        return cross_replica_ops.cross_replica_sum(
            tf.constant(DATA[replica]), replica_group_size=group_size
        )

    built = run_on_replicas(fn, replicas)
    compiled = run_on_replicas(fn, replicas, jit_compile=True)
    for ours, theirs in zip(compiled, built, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("replicas, group_size", [(1, None), (2, None), (4, None), (4, 2)])
def test_gradient_of_a_sum_is_a_sum_of_the_gradients(run_on_replicas, replicas, group_size):
    weights = RNG.normal(size=(4, 2, 3)).astype(np.float32)

    def fn(replica):
        x = tf.constant(DATA[replica])
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(
                weights[replica] * cross_replica_ops.cross_replica_sum(x, group_size)
            ) + tf.reduce_sum(
                weights[replica] ** 2 * cross_replica_ops.cross_replica_mean(x, group_size)
            )
        return tape.gradient(loss, x)

    got = run_on_replicas(fn, replicas)
    size = group_size or replicas
    expected = grouped(weights, replicas, group_size, lambda w: w.sum(0) + (w**2).sum(0) / size)
    for r in range(replicas):
        np.testing.assert_allclose(got[r], expected[r], rtol=1e-5)


def test_integer_mean_truncates(run_on_replicas):
    def fn(replica):
        x = tf.constant([[1, -1], [2, -2]][replica], tf.int32)
        return cross_replica_ops.cross_replica_mean(x)

    got = run_on_replicas(fn, 2)
    np.testing.assert_array_equal(got[0], [1, -1])  # 3 / 2 and -3 / 2, truncated
    np.testing.assert_array_equal(got[1], [1, -1])


def test_half_precision_mean_accumulates_in_float32(run_on_replicas):
    dtype = tf.float16

    # Four replicas of 65504 (float16's largest value): the sum overflows float16, the
    # mean does not (popops_cross_replica_mean_test.py, "Overflow").
    def fn(replica):
        return cross_replica_ops.cross_replica_mean(tf.constant([65504.0, 1.0], dtype))

    got = run_on_replicas(fn, 4)
    for r in range(4):
        assert got[r].dtype == dtype.as_numpy_dtype
        np.testing.assert_array_equal(np.asarray(got[r], np.float32), [65504.0, 1.0])


@pytest.mark.parametrize("replicas, group_size", [(1, 2), (2, 4), (4, 3)])
def test_group_size_must_divide_the_replica_count(run_on_replicas, replicas, group_size):
    def fn(replica):
        return cross_replica_ops.cross_replica_sum(tf.constant(1.0), group_size)

    with pytest.raises(
        ValueError,
        match=f"the {replicas} replicas cannot be split into groups of "
        f"replica_group_size={group_size}",
    ):
        run_on_replicas(fn, replicas)


@pytest.mark.parametrize("group_size", [0, -1, 0.5])
def test_group_size_must_be_a_positive_int(group_size):
    with pytest.raises(ValueError, match="replica_group_size must be a positive int"):
        cross_replica_ops.cross_replica_mean(tf.constant(1.0), group_size)


def test_a_str_group_size_is_a_type_error():
    with pytest.raises(TypeError, match="replica_group_size must be an int, got '2'"):
        cross_replica_ops.cross_replica_mean(tf.constant(1.0), "2")


def test_without_replicas_the_ops_are_the_identity():
    x = tf.constant(DATA[0])
    np.testing.assert_array_equal(cross_replica_ops.cross_replica_sum(x), DATA[0])
    np.testing.assert_array_equal(cross_replica_ops.cross_replica_mean(x, 1), DATA[0])


@pytest.mark.parametrize("inplace", [False, True])
def test_assume_equal_across_replicas_returns_its_inputs(run_on_replicas, inplace):
    def fn(replica):
        structure = {"a": tf.constant(DATA[replica]), "b": [tf.constant(replica)]}
        return cross_replica_ops.assume_equal_across_replicas(structure, inplace=inplace)

    got = run_on_replicas(fn, 2)
    for r in range(2):
        np.testing.assert_array_equal(got[r]["a"], DATA[r])
        np.testing.assert_array_equal(got[r]["b"][0], r)


@pytest.mark.parametrize("inplace", [1, 0, None])
def test_assume_equal_across_replicas_reads_inplace_for_its_truth(inplace):
    # The original tests `if not inplace`, so any value works.
    value = cross_replica_ops.assume_equal_across_replicas(tf.constant([1.0, 2.0]), inplace=inplace)
    np.testing.assert_array_equal(value, [1.0, 2.0])


@pytest.mark.parametrize("gather", [False, True])
def test_shapes_that_differ_across_replicas_are_an_error_naming_them(run_on_replicas, gather):
    from openipu._src.ops import all_to_all_op

    def fn(replica):
        x = tf.ones([2 + replica])
        if gather:
            return all_to_all_op.all_gather(x, replication_factor=2)
        return cross_replica_ops.cross_replica_sum(x)

    with pytest.raises(ValueError, match=r"shapes differ \(replica 0: \[2\], replica 1: \[3\]\)"):
        run_on_replicas(fn, 2)
