"""reduce_scatter against numpy and the spec's zero-padded example."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import reduce_scatter_op

RNG = np.random.default_rng(13)


def numpy_reduce_scatter(values, replicas, k, reduce):
    results = []
    length = -(-values.shape[1] // k)
    for r in range(replicas):
        first = (r // k) * k
        reduced = reduce(values[first : first + k])
        padded = np.concatenate([reduced, np.zeros(length * k - len(reduced), reduced.dtype)])
        results.append(padded[(r % k) * length : (r % k + 1) * length])
    return results


def test_the_spec_example(run_on_replicas):
    # R0 [x0, y0, z0], R1 [x1, y1, z1] -> R0 [x0 + x1, y0 + y1], R1 [z0 + z1, 0].
    inputs = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]], np.float32)

    got = run_on_replicas(
        lambda replica: reduce_scatter_op.reduce_scatter(tf.constant(inputs[replica]), 2), 2
    )
    np.testing.assert_array_equal(got[0], [11.0, 22.0])
    np.testing.assert_array_equal(got[1], [33.0, 0.0])


@pytest.mark.parametrize("replicas, k", [(1, 1), (2, 1), (2, 2), (4, 2), (4, 4)])
@pytest.mark.parametrize("length", [1, 5, 8])
@pytest.mark.parametrize(
    "op, reduce",
    [
        ("COLLECTIVE_OP_ADD", lambda v: v.sum(0)),
        ("COLLECTIVE_OP_MEAN", lambda v: v.mean(0)),
        ("COLLECTIVE_OP_MAX", lambda v: v.max(0)),
        ("COLLECTIVE_OP_MUL", lambda v: v.prod(0)),
    ],
)
def test_matches_numpy(run_on_replicas, replicas, k, length, op, reduce):
    data = RNG.normal(size=(4, length)).astype(np.float32)

    got = run_on_replicas(
        lambda replica: reduce_scatter_op.reduce_scatter(tf.constant(data[replica]), k, op=op),
        replicas,
    )
    expected = numpy_reduce_scatter(data[:replicas], replicas, k, reduce)
    for r in range(replicas):
        assert got[r].shape == (-(-length // k),)
        np.testing.assert_allclose(got[r], expected[r], rtol=1e-5)


def test_a_list_is_scattered_tensor_by_tensor(run_on_replicas):
    data = RNG.normal(size=(2, 3)).astype(np.float32)

    def fn(replica):
        return reduce_scatter_op.reduce_scatter(
            [tf.constant(data[replica]), tf.constant([replica + 1] * 4)], 2
        )

    got = run_on_replicas(fn, 2)
    expected = numpy_reduce_scatter(data, 2, 2, lambda v: v.sum(0))
    for r in range(2):
        np.testing.assert_allclose(got[r][0], expected[r], rtol=1e-6)
        np.testing.assert_array_equal(got[r][1], [3, 3])


def test_gradient_is_a_gather_of_the_slices(run_on_replicas):
    data = RNG.normal(size=(2, 5)).astype(np.float32)
    weights = RNG.normal(size=(2, 3)).astype(np.float32)

    def fn(replica):
        x = tf.constant(data[replica])
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(weights[replica] * reduce_scatter_op.reduce_scatter(x, 2))
        return tape.gradient(loss, x)

    got = run_on_replicas(fn, 2)
    expected = np.concatenate(weights)[:5]  # the padding's gradient is dropped
    for r in range(2):
        np.testing.assert_allclose(got[r], expected, rtol=1e-6)


@pytest.mark.parametrize("replicas, k", [(1, 1), (2, 2), (4, 2)])
def test_compiled_equals_eager_build(run_on_replicas, replicas, k):
    data = RNG.normal(size=(4, 7)).astype(np.float32)

    def fn(replica):
        return reduce_scatter_op.reduce_scatter(tf.constant(data[replica]), k)

    built = run_on_replicas(fn, replicas)
    compiled = run_on_replicas(fn, replicas, jit_compile=True)
    for ours, theirs in zip(compiled, built, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_without_replicas_it_is_the_identity():
    np.testing.assert_array_equal(
        reduce_scatter_op.reduce_scatter(tf.constant([1.0, 2.0, 3.0]), 1), [1, 2, 3]
    )


def test_logical_ops_need_bools(run_on_replicas):
    got = run_on_replicas(
        lambda replica: reduce_scatter_op.reduce_scatter(
            tf.constant([[True, True], [True, False]][replica]), 2, "COLLECTIVE_OP_LOGICAL_AND"
        ),
        2,
    )
    np.testing.assert_array_equal(got[0], [True])
    np.testing.assert_array_equal(got[1], [False])
    with pytest.raises(TypeError, match="COLLECTIVE_OP_LOGICAL_OR needs bool tensors"):
        reduce_scatter_op.reduce_scatter(tf.constant([1.0]), 1, "COLLECTIVE_OP_LOGICAL_OR")


@pytest.mark.parametrize(
    "x, k, op, error, message",
    [
        ([[1.0, 2.0]], 1, "COLLECTIVE_OP_ADD", ValueError, "must have rank 1"),
        (1.0, 1, "COLLECTIVE_OP_ADD", ValueError, "must have rank 1"),
        ([1.0], 1, "COLLECTIVE_OP_DIVIDE", ValueError, "op must be one of COLLECTIVE_OP_ADD"),
        ([1.0], 2, "COLLECTIVE_OP_ADD", ValueError, "the 1 replicas cannot be split"),
        ([1.0], 0, "COLLECTIVE_OP_ADD", ValueError, "replication_factor must be a positive"),
        ([True], 1, "COLLECTIVE_OP_ADD", TypeError, "COLLECTIVE_OP_ADD needs numeric tensors"),
    ],
)
def test_bad_input(x, k, op, error, message):
    with pytest.raises(error, match=message):
        reduce_scatter_op.reduce_scatter(tf.constant(x), k, op=op)
