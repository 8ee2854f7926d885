"""all_to_all_op against numpy: gathers within replica groups, XLA's AllToAll block exchange."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import all_to_all_op

RNG = np.random.default_rng(12)
DATA = RNG.normal(size=(4, 4, 8)).astype(np.float32)

GROUPINGS = [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4)]


def numpy_all_to_all(values, replicas, k, split_dimension, concat_dimension):
    """Replica r gets, from each sender s of its group, block (r mod k) of values[s]."""
    results = []
    for r in range(replicas):
        first = (r // k) * k
        blocks = [
            np.split(values[s], k, axis=split_dimension)[r % k] for s in range(first, first + k)
        ]
        results.append(np.concatenate(blocks, axis=concat_dimension))
    return results


@pytest.mark.parametrize("replicas, k", GROUPINGS)
def test_all_gather_stacks_the_group(run_on_replicas, replicas, k):
    def fn(replica):
        return all_to_all_op.all_gather(tf.constant(DATA[replica]), replication_factor=k)

    got = run_on_replicas(fn, replicas)
    for r in range(replicas):
        first = (r // k) * k
        assert got[r].shape == (k, 4, 8)
        np.testing.assert_array_equal(got[r], DATA[first : first + k])


def test_all_gather_of_a_list_gathers_each(run_on_replicas):
    def fn(replica):
        return all_to_all_op.all_gather(
            [tf.constant(DATA[replica]), tf.constant([replica, 10 * replica])], 2
        )

    got = run_on_replicas(fn, 2)
    for r in range(2):
        assert isinstance(got[r], list)
        np.testing.assert_array_equal(got[r][0], DATA[:2])
        np.testing.assert_array_equal(got[r][1], [[0, 0], [1, 10]])


@pytest.mark.parametrize("replicas, k", [(2, 2), (4, 2), (4, 4)])
def test_all_gather_gradient_sums_the_group_slices(run_on_replicas, replicas, k):
    weights = RNG.normal(size=(4, 4, 4, 8)).astype(np.float32)

    def fn(replica):
        x = tf.constant(DATA[replica])
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(weights[replica, :k] * all_to_all_op.all_gather(x, k))
        return tape.gradient(loss, x)

    got = run_on_replicas(fn, replicas)
    for r in range(replicas):
        first = (r // k) * k
        expected = sum(weights[s, r % k] for s in range(first, first + k))
        np.testing.assert_allclose(got[r], expected, rtol=1e-5)


@pytest.mark.parametrize("replicas, k", GROUPINGS)
@pytest.mark.parametrize("split_dimension, concat_dimension", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_all_to_all_matches_xla_semantics(
    run_on_replicas, replicas, k, split_dimension, concat_dimension
):
    def fn(replica):
        return all_to_all_op.all_to_all(
            tf.constant(DATA[replica]), split_dimension, concat_dimension, k
        )

    got = run_on_replicas(fn, replicas)
    expected = numpy_all_to_all(DATA, replicas, k, split_dimension, concat_dimension)
    for r in range(replicas):
        np.testing.assert_array_equal(got[r], expected[r])


def test_all_to_all_of_two_replicas_by_hand(run_on_replicas):
    # Replica 0 holds [a0, a1], replica 1 [b0, b1]: block i goes to replica i.
    def fn(replica):
        return all_to_all_op.all_to_all(tf.constant([[1, 2], [3, 4]][replica]), 0, 0, 2)

    got = run_on_replicas(fn, 2)
    np.testing.assert_array_equal(got[0], [1, 3])
    np.testing.assert_array_equal(got[1], [2, 4])

    def with_numpy_dimensions(replica):  # int attributes in the original: NumPy ints work
        x = tf.constant([[1, 2], [3, 4]][replica])
        return all_to_all_op.all_to_all(x, np.int64(0), np.int32(0), 2)

    again = run_on_replicas(with_numpy_dimensions, 2)
    np.testing.assert_array_equal(again[0], [1, 3])
    np.testing.assert_array_equal(again[1], [2, 4])

    def with_float_dimensions(replica):  # TensorFlow converts int attributes with int()
        x = tf.constant([[1, 2], [3, 4]][replica])
        return all_to_all_op.all_to_all(x, 0.0, 0.0, 2.0)

    floats = run_on_replicas(with_float_dimensions, 2)
    np.testing.assert_array_equal(floats[0], [1, 3])
    np.testing.assert_array_equal(floats[1], [2, 4])
    with pytest.raises(TypeError, match="split_dimension must be an int, got 'rows'"):
        all_to_all_op.all_to_all(tf.constant(DATA[0]), "rows", 0, 1)


@pytest.mark.parametrize("replicas, k", [(1, 1), (2, 2), (4, 2)])
def test_compiled_equals_eager_build(run_on_replicas, replicas, k):
    def fn(replica):
        x = tf.constant(DATA[replica])
        return all_to_all_op.all_gather(x, k), all_to_all_op.all_to_all(x, 1, 0, k)

    built = run_on_replicas(fn, replicas)
    compiled = run_on_replicas(fn, replicas, jit_compile=True)
    for ours, theirs in zip(compiled, built, strict=True):
        np.testing.assert_array_equal(ours[0], theirs[0])
        np.testing.assert_array_equal(ours[1], theirs[1])


def test_all_to_all_gradient_sends_the_blocks_back(run_on_replicas):
    weights = RNG.normal(size=(2, 8, 4)).astype(np.float32)

    def fn(replica):
        x = tf.constant(DATA[replica])
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(weights[replica] * all_to_all_op.all_to_all(x, 1, 0, 2))
        return tape.gradient(loss, x)

    got = run_on_replicas(fn, 2)
    # The transpose of an all-to-all is the all-to-all that swaps the dimensions.
    expected = numpy_all_to_all(weights, 2, 2, 0, 1)
    for r in range(2):
        np.testing.assert_allclose(got[r], expected[r], rtol=1e-6)


def test_without_replicas_all_gather_adds_a_group_axis():
    got = all_to_all_op.all_gather(tf.constant(DATA[0]), 1)
    np.testing.assert_array_equal(got, DATA[:1])
    np.testing.assert_array_equal(all_to_all_op.all_to_all(tf.constant(DATA[0]), 0, 1, 1), DATA[0])


@pytest.mark.parametrize("replicas, k", [(1, 2), (4, 3)])
def test_replication_factor_must_divide_the_replica_count(run_on_replicas, replicas, k):
    def fn(replica):
        return all_to_all_op.all_gather(tf.constant(1.0), k)

    with pytest.raises(
        ValueError,
        match=f"the {replicas} replicas cannot be split into groups of replication_factor={k}",
    ):
        run_on_replicas(fn, replicas)


@pytest.mark.parametrize(
    "split_dimension, concat_dimension, message",
    [
        (2, 0, r"split_dimension must be in \[0, 2\)"),
        (-1, 0, r"split_dimension must be in \[0, 2\)"),
        (0, 5, r"concat_dimension must be in \[0, 2\)"),
    ],
)
def test_all_to_all_dimensions_must_be_in_range(split_dimension, concat_dimension, message):
    with pytest.raises(ValueError, match=message):
        all_to_all_op.all_to_all(tf.constant(DATA[0]), split_dimension, concat_dimension, 1)


def test_all_to_all_split_must_divide_evenly(run_on_replicas):
    def fn(replica):
        return all_to_all_op.all_to_all(tf.ones([3, 2]), 0, 0, 2)

    with pytest.raises(
        ValueError,
        match=r"dimension 0 of x \(size 3\) must be a multiple of "
        "replication_factor=2",
    ):
        run_on_replicas(fn, 2)
