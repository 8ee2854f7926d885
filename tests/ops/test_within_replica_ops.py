"""within_replica_ops: the spec's examples and numpy over the shards of one replica."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import within_replica_ops

RNG = np.random.default_rng(14)

OPS = {
    "COLLECTIVE_OP_ADD": lambda v: v.sum(0),
    "COLLECTIVE_OP_MEAN": lambda v: v.mean(0),
    "COLLECTIVE_OP_MUL": lambda v: v.prod(0),
    "COLLECTIVE_OP_MIN": lambda v: v.min(0),
    "COLLECTIVE_OP_MAX": lambda v: v.max(0),
    "COLLECTIVE_OP_SQUARE_ADD": lambda v: (v**2).sum(0),
}


def padded_stack(shards):
    length = max(len(s) for s in shards)
    return np.stack([np.pad(s, (0, length - len(s))) for s in shards])


def test_all_reduce_spec_example():
    # IPU0 [x0, y0], IPU1..3 [x, y, z] -> every shard [op(x.), op(y.), op(0, z1, z2, z3)].
    shards = [np.array([1.0, 2.0], np.float32)] + [
        np.array([10.0, 20.0, 30.0], np.float32) * i for i in (1, 2, 3)
    ]
    got = within_replica_ops.all_reduce(shards, "COLLECTIVE_OP_ADD")
    assert isinstance(got, tuple) and len(got) == 4
    for shard in got:
        np.testing.assert_array_equal(shard, [61.0, 122.0, 180.0])
    got = within_replica_ops.all_reduce(shards, "COLLECTIVE_OP_MIN")
    np.testing.assert_array_equal(got[2], [1.0, 2.0, 0.0])  # the zero padding takes part


def test_reduce_scatter_spec_example():
    # IPU0..3 [x, y, z] -> IPU0 [0], IPU1 [op(y.)], IPU2 [op(z.)], IPU3 [op(x.)].
    shards = [np.array([1.0, 2.0, 3.0], np.float32) * 10**i for i in range(4)]
    got = within_replica_ops.reduce_scatter(shards, "COLLECTIVE_OP_ADD")
    assert isinstance(got, tuple) and len(got) == 4
    np.testing.assert_array_equal(got[0], [0.0])
    np.testing.assert_array_equal(got[1], [2222.0])
    np.testing.assert_array_equal(got[2], [3333.0])
    np.testing.assert_array_equal(got[3], [1111.0])


@pytest.mark.parametrize("shard_count", [1, 2, 3, 4])
@pytest.mark.parametrize("length", [1, 5, 8])
@pytest.mark.parametrize("op", sorted(OPS))
def test_reduce_scatter_and_all_reduce_match_numpy(shard_count, length, op):
    shards = [RNG.normal(size=length).astype(np.float32) for _ in range(shard_count)]
    reduced = OPS[op](padded_stack(shards))
    column_length = -(-length // shard_count)
    # Dealt out in turn: element j to column j mod S (the original's within_replicas_test).
    padded = np.pad(reduced, (0, column_length * shard_count - length))
    columns = padded.reshape(column_length, shard_count).T
    # The spec's placement: shard 0 gets the last column, the last shard the first.
    placement = list(range(shard_count))
    placement[0], placement[-1] = placement[-1], placement[0]

    scattered = within_replica_ops.reduce_scatter(shards, op)
    for shard, column in enumerate(placement):
        np.testing.assert_allclose(scattered[shard], columns[column], rtol=1e-5)
    for shard in within_replica_ops.all_reduce(shards, op):
        np.testing.assert_allclose(shard, reduced, rtol=1e-5)


def test_all_reduce_takes_scalars_as_shape_1():
    # As the original (within_replica_ops.py reshapes scalars to [1]).
    got = within_replica_ops.all_reduce([tf.constant(1), tf.constant(2)], "COLLECTIVE_OP_ADD")
    assert got[0].shape == (1,)
    np.testing.assert_array_equal(got[1], [3])
    # Its _validate_inputs wants one rank first: a scalar and a vector are refused.
    with pytest.raises(ValueError, match="Expected tensors to all be of the same rank."):
        within_replica_ops.all_reduce([tf.constant(1), tf.constant([2, 5])], "add")


def test_logical_ops():
    shards = [tf.constant([True, False]), tf.constant([True, True])]
    np.testing.assert_array_equal(
        within_replica_ops.all_reduce(shards, "COLLECTIVE_OP_LOGICAL_AND")[0], [True, False]
    )
    np.testing.assert_array_equal(
        within_replica_ops.all_reduce(shards, "COLLECTIVE_OP_LOGICAL_OR")[1], [True, True]
    )


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_all_gather_gives_every_shard_the_flat_gather_in_the_concatenated_shape(axis):
    # As the original: the shards are flattened, gathered in shard order, then reshaped to
    # the shape tf.concat would give (so along axis 1 the rows are not interleaved).
    shards = [RNG.normal(size=(2, 3)).astype(np.float32) for _ in range(3)]
    got = within_replica_ops.all_gather(shards, axis=axis)
    assert isinstance(got, list) and len(got) == 3
    shape = np.concatenate(shards, axis=axis).shape
    for shard in got:
        np.testing.assert_array_equal(
            shard, np.concatenate([s.ravel() for s in shards]).reshape(shape)
        )


def test_all_gather_of_scalars_is_a_vector():
    got = within_replica_ops.all_gather([tf.constant(1), tf.constant(2)])
    for shard in got:
        np.testing.assert_array_equal(shard, [1, 2])


def test_all_gather_refuses_shapes_that_differ_outside_the_axis():
    with pytest.raises(
        ValueError, match="Expecting tensor dimensions to all have the same sizes, except for dim 0"
    ):
        within_replica_ops.all_gather([tf.ones([1, 2]), tf.ones([1, 3])])


def test_gradients_are_the_transposed_collectives():
    shards = [tf.constant(RNG.normal(size=3).astype(np.float32)) for _ in range(2)]
    weights = RNG.normal(size=(2, 6)).astype(np.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(shards)
        gathered = within_replica_ops.all_gather(shards)
        gather_loss = sum(tf.reduce_sum(w * g) for w, g in zip(weights, gathered, strict=True))
        reduced = within_replica_ops.all_reduce(shards, "COLLECTIVE_OP_ADD")
        reduce_loss = sum(tf.reduce_sum(w[:3] * r) for w, r in zip(weights, reduced, strict=True))
    # An all-gather's gradient is a reduce-scatter of the gradients, an all-reduce's an all-reduce.
    gather_grads = tape.gradient(gather_loss, shards)
    np.testing.assert_allclose(gather_grads[0], weights.sum(0)[:3], rtol=1e-6)
    np.testing.assert_allclose(gather_grads[1], weights.sum(0)[3:], rtol=1e-6)
    for grad in tape.gradient(reduce_loss, shards):
        np.testing.assert_allclose(grad, weights[:, :3].sum(0), rtol=1e-6)


def test_compiled_equals_eager():
    shards = [RNG.normal(size=n).astype(np.float32) for n in (3, 4, 4)]

    def ops(*shards):
        shards = list(shards)
        return (
            within_replica_ops.all_gather(shards),
            within_replica_ops.all_reduce(shards, "COLLECTIVE_OP_MAX"),
            within_replica_ops.reduce_scatter(shards, "COLLECTIVE_OP_ADD"),
        )

    compiled = tf.function(ops, jit_compile=True)(*shards)
    eager = ops(*shards)
    for ours, theirs in zip(tf.nest.flatten(compiled), tf.nest.flatten(eager), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize(
    "function, shards, error, message",
    [
        ("all_reduce", [tf.ones([2, 2])], ValueError, "must have rank 0 or 1"),
        ("reduce_scatter", [tf.ones([2, 2])], ValueError, "must have rank 0 or 1"),
        (
            "all_reduce",
            [tf.ones([2]), tf.ones([2], tf.int32)],
            ValueError,
            "Expected tensors to all be of the same type",
        ),
        ("reduce_scatter", [], ValueError, "input_shards is empty"),
        ("all_reduce", tf.ones([2]), TypeError, "must be a list of tensors"),
        (
            "all_gather",
            [tf.ones([2]), tf.ones([2, 1])],
            ValueError,
            "Expected tensors to all be of the same rank",
        ),
    ],
)
def test_bad_shards(function, shards, error, message):
    args = (shards,) if function == "all_gather" else (shards, "COLLECTIVE_OP_ADD")
    with pytest.raises(error, match=message):
        getattr(within_replica_ops, function)(*args)


def test_a_tensor_given_for_two_shards_is_refused():
    # As the original: each shard's tensor lives on its own IPU, so one tensor cannot be two.
    shard = tf.ones([2])
    for function in ("all_reduce", "reduce_scatter"):
        with pytest.raises(ValueError, match="duplicate entries"):
            getattr(within_replica_ops, function)([shard, shard], "COLLECTIVE_OP_ADD")
    with pytest.raises(ValueError, match="duplicate entries"):
        within_replica_ops.all_gather([shard, shard])


def test_bad_op():
    with pytest.raises(ValueError, match="op must be one of"):
        within_replica_ops.all_reduce([tf.ones([2])], "COLLECTIVE_OP_XOR")
