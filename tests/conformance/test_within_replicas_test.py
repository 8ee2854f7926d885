"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/within_replicas_test.py`.

`within_replica_ops.all_gather`, `reduce_scatter` and `all_reduce` across the shards of
one replica (2 or 4 IPUs, each value made on its own shard with `ipu_shard`): gathered
values, concatenation axes, mixed sizes and scalars, their gradients; the reductions
(add, mul, min, max, logical and/or) checked against Python's reductions of the shards'
values, distributed as a reduce-scatter or an all-reduce does (the original's
`reduce` helpers); and the refusals: inputs of mixed types or ranks, one tensor passed
twice, an invalid concatenation, inputs not in shard order (at run time). Results are
compared as the original compares them, as a multiset of per-shard lists.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ops import within_replica_ops

v1 = tf.compat.v1


@pytest.fixture
def shards(tf1_graph):
    """`shards(n)` configures a device of n IPUs (one replica of n shards)."""

    def configure(count):
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = count
        config.configure_ipu_system()

    yield configure
    ipu.config.reset_ipu_configuration()


def _sharded(values, dtype, zero):
    """values[i] made on shard i (plus a zero input, as the original, so that the value is
    computed there rather than folded into a constant)."""
    zero = tf.cast(zero, dtype)
    made = []
    for i, value in enumerate(values):
        with ipu.scopes.ipu_shard(i):
            array = np.asarray(value)
            made.append(tf.constant(array, shape=array.shape, dtype=dtype) + zero)
    return made


def _compile(my_net, inputs=None):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        return ipu.ipu_compiler.compile(
            my_net, inputs=inputs if inputs is not None else [tf.constant(0.0)]
        )


def _run(graph, result):
    with v1.Session(graph=graph) as sess:
        return sess.run(result)


def _assert_count_equal(got, expected):
    """The original's assertCountEqual over per-shard lists: equal as multisets."""
    as_lists = sorted(np.asarray(value).tolist() for value in got)
    assert as_lists == sorted(np.asarray(value).tolist() for value in expected)


DTYPES = [np.float32, np.float16, np.int32]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.follows("testAllGather")
def test_all_gather(tf1_graph, shards, dtype):
    shards(4)

    def my_net(zero):
        return within_replica_ops.all_gather(
            _sharded([[1, 1], [2, 2], [3, 3], [4, 4]], dtype, zero)
        )

    gathered = _run(tf1_graph, _compile(my_net))
    assert isinstance(gathered, list)
    _assert_count_equal(gathered, [[1, 1, 2, 2, 3, 3, 4, 4]] * 4)


@pytest.mark.follows("testAllGatherGrad")
def test_all_gather_grad(tf1_graph, shards):
    shards(2)

    def my_net(zero):
        shard0, shard1 = _sharded([[1, 1], [2, 2]], np.float32, zero)
        with tf.GradientTape() as tape:
            tape.watch([shard0, shard1])
            gathered = within_replica_ops.all_gather([shard0, shard1])
            loss = tf.reduce_mean(gathered[0] ** 2) + tf.reduce_mean(gathered[1] ** 2)
        return tape.gradient(loss, [shard0, shard1])

    grads = _run(tf1_graph, _compile(my_net))
    assert isinstance(grads, list)
    # gathered = [1, 1, 2, 2] on both shards; d loss / d gathered = gathered / 2 on each,
    # summed back over the 2 shards' copies.
    _assert_count_equal(grads, [[1, 1], [2, 2]])


@pytest.mark.follows("testAllGatherMixedSizes")
def test_all_gather_mixed_sizes(tf1_graph, shards):
    shards(4)

    def my_net(zero):
        shard0, shard1, shard2, shard3 = _sharded(
            [[1, 1], [2, 2], [3, 3], [4, 4]], np.float32, zero
        )
        return within_replica_ops.all_gather(
            [shard0[0:0], shard1, tf.concat([shard2, shard2], axis=0), shard3]
        )

    gathered = _run(tf1_graph, _compile(my_net))
    _assert_count_equal(gathered, [[2, 2, 3, 3, 3, 3, 4, 4]] * 4)


@pytest.mark.follows("testAllGatherConcatDefault")
def test_all_gather_concat_default(tf1_graph, shards):
    shards(2)

    def my_net(zero):
        values = [[[1, 1, 1], [2, 2, 2]], [[3, 3, 3], [4, 4, 4]]]
        return within_replica_ops.all_gather(_sharded(values, np.float32, zero))

    gathered = _run(tf1_graph, _compile(my_net))
    assert len(gathered) == 2
    for value in gathered:  # concatenated along axis 0
        np.testing.assert_array_equal(value, [[1, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 4]])


TWO_RANK_3 = [[[[1, 1, 1], [2, 2, 2]]], [[[1, 1, 1], [2, 2, 2], [3, 3, 3]]]]


@pytest.mark.follows("testAllGatherConcatAxis")
def test_all_gather_concat_axis(tf1_graph, shards):
    shards(2)

    def my_net(zero):
        return within_replica_ops.all_gather(_sharded(TWO_RANK_3, np.float32, zero), axis=1)

    gathered = _run(tf1_graph, _compile(my_net))
    assert len(gathered) == 2
    for value in gathered:
        np.testing.assert_array_equal(value, np.concatenate(TWO_RANK_3, axis=1))


@pytest.mark.follows("testAllGatherScalar")
def test_all_gather_scalar(tf1_graph, shards):
    shards(2)

    def my_net(zero):
        return within_replica_ops.all_gather(_sharded([1, 2], np.int32, zero), axis=0)

    _assert_count_equal(_run(tf1_graph, _compile(my_net)), [[1, 2]] * 2)


@pytest.mark.follows("testAllGatherInvalidAxis")
def test_all_gather_invalid_axis(tf1_graph, shards):
    shards(2)

    def my_net(zero):
        # Shapes [1, 2, 3] and [1, 3, 3] differ outside axis 0.
        return within_replica_ops.all_gather(_sharded(TWO_RANK_3, np.float32, zero), axis=0)

    with pytest.raises(ValueError):
        _compile(my_net)


@pytest.mark.follows("testAllGatherDifferentRanks")
def test_all_gather_different_ranks(tf1_graph, shards):
    shards(4)

    def my_net(zero):
        values = [[1, 1], [[1], [1]], [[[1, 1, 1]], [[1, 1, 1]]], [[1], [1]]]
        return within_replica_ops.all_gather(_sharded(values, np.float32, zero))

    with pytest.raises(ValueError):
        _compile(my_net)


def _reduce_scatter_add(inputs):
    return within_replica_ops.reduce_scatter(inputs, op="COLLECTIVE_OP_ADD")


def _all_reduce_add(inputs):
    return within_replica_ops.all_reduce(inputs, op="COLLECTIVE_OP_ADD")


WITHIN_REPLICA_OPS = pytest.mark.parametrize(
    "within_replica_op",
    [within_replica_ops.all_gather, _reduce_scatter_add, _all_reduce_add],
    ids=["AllGather", "ReduceScatter", "AllReduce"],
)


@WITHIN_REPLICA_OPS
@pytest.mark.follows("testOpShardOrder")
def test_op_shard_order(tf1_graph, shards, within_replica_op):
    shards(2)

    def my_net(zero):
        shard0, shard1 = _sharded([[1, 1], [2, 2]], np.int32, zero)
        return within_replica_op([shard1, shard0])

    # The original's compiler refuses it when the session first runs the program; openipu
    # refuses it when building the program (as its other compile-time checks).
    with pytest.raises(tf.errors.FailedPreconditionError, match="incrementing shard order"):
        _run(tf1_graph, _compile(my_net))


@WITHIN_REPLICA_OPS
@pytest.mark.follows("testOpMixedTypeShards")
def test_op_mixed_type_shards(tf1_graph, within_replica_op):
    def my_net(zero):
        shard0, shard1 = _sharded([[1, 1], [2, 2]], np.int32, zero)
        return within_replica_op([tf.cast(shard0, np.float32), shard1])

    with pytest.raises(ValueError):
        _compile(my_net)


@WITHIN_REPLICA_OPS
@pytest.mark.follows("testOpUniqueArgs")
def test_op_unique_args(tf1_graph, within_replica_op):
    def my_net(zero):
        shard0, _ = _sharded([[1, 1], [2, 2]], np.int32, zero)
        return within_replica_op([shard0, shard0])

    with pytest.raises(ValueError):
        _compile(my_net)


# The reductions: as a reduce-scatter distributes them (the original's helper: the
# reduced elements taken from the end, one per shard in turn, zero-padded) and as an
# all-reduce does (every shard gets all of them).


def _as_reduce_scatter(op, *shard_values):
    reduced = [op(values) for values in zip(*shard_values, strict=True)]
    count = len(shard_values)
    output: list[list] = [[] for _ in range(count)]
    for _ in range(math.ceil(len(reduced) / count)):
        for shard in range(count):
            output[shard].append(reduced.pop() if reduced else 0)
    return output


def _as_all_reduce(op, *shard_values):
    reduced = [op(values) for values in zip(*shard_values, strict=True)]
    return [reduced] * len(shard_values)


REDUCTIONS = pytest.mark.parametrize(
    "reduce_op, expect",
    [
        (within_replica_ops.reduce_scatter, _as_reduce_scatter),
        (within_replica_ops.all_reduce, _as_all_reduce),
    ],
    ids=["ReduceScatter", "AllReduce"],
)


def _reduce_run(graph, shards, reduce_op, values, dtype, op="COLLECTIVE_OP_ADD"):
    shards(len(values))

    def my_net(zero):
        return reduce_op(_sharded(values, dtype, zero), op=op)

    return _run(graph, _compile(my_net))


@REDUCTIONS
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.follows("testReduction")
def test_reduction(tf1_graph, shards, reduce_op, expect, dtype):
    reduced = _reduce_run(tf1_graph, shards, reduce_op, [[1, 1], [2, 2]], dtype)
    assert isinstance(reduced, list)
    _assert_count_equal(reduced, expect(sum, [1, 1], [2, 2]))


@REDUCTIONS
@pytest.mark.parametrize(
    "ipu_op, python_op",
    [
        ("COLLECTIVE_OP_ADD", sum),
        ("COLLECTIVE_OP_MUL", np.prod),
        ("COLLECTIVE_OP_MIN", min),
        ("COLLECTIVE_OP_MAX", max),
    ],
)
@pytest.mark.follows("testNumericOps")
def test_numeric_ops(tf1_graph, shards, reduce_op, expect, ipu_op, python_op):
    reduced = _reduce_run(tf1_graph, shards, reduce_op, [[1, 1], [2, 2]], np.float32, ipu_op)
    _assert_count_equal(reduced, expect(python_op, [1, 1], [2, 2]))


@REDUCTIONS
@pytest.mark.parametrize(
    "ipu_op, python_op", [("COLLECTIVE_OP_LOGICAL_AND", all), ("COLLECTIVE_OP_LOGICAL_OR", any)]
)
@pytest.mark.follows("testLogicalOps")
def test_logical_ops(tf1_graph, shards, reduce_op, expect, ipu_op, python_op):
    shards(2)

    def my_net(val):
        with ipu.scopes.ipu_shard(0):
            a = tf.greater_equal(val, 2)
        with ipu.scopes.ipu_shard(1):
            b = tf.greater_equal(val, 1)
        return reduce_op([a, b], op=ipu_op)  # [False, True] and [True, True]

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        val = tf.constant([1, 2], shape=[2], dtype=np.int32)
        result = ipu.ipu_compiler.compile(my_net, inputs=[val])
    reduced = _run(tf1_graph, result)
    _assert_count_equal(reduced, expect(python_op, [0, 1], [1, 1]))


@REDUCTIONS
@pytest.mark.follows("testMoreElementsThanShards")
def test_more_elements_than_shards(tf1_graph, shards, reduce_op, expect):
    values = [[v] * 5 for v in (1, 2, 3, 4)]
    reduced = _reduce_run(tf1_graph, shards, reduce_op, values, np.int32)
    _assert_count_equal(reduced, expect(sum, *values))


@REDUCTIONS
@pytest.mark.follows("testFewerElementsThanShards")
def test_fewer_elements_than_shards(tf1_graph, shards, reduce_op, expect):
    values = [[v] * 2 for v in (1, 2, 3, 4)]
    reduced = _reduce_run(tf1_graph, shards, reduce_op, values, np.int32)
    _assert_count_equal(reduced, expect(sum, *values))


@REDUCTIONS
@pytest.mark.follows("testMixedSizes")
def test_mixed_sizes(tf1_graph, shards, reduce_op, expect):
    # The smaller input counts as zero-padded: [2, 0] + [1, 1].
    reduced = _reduce_run(tf1_graph, shards, reduce_op, [[2], [1, 1]], np.int32)
    _assert_count_equal(reduced, expect(sum, [2, 0], [1, 1]))


@REDUCTIONS
@pytest.mark.follows("testScalar")
def test_scalar(tf1_graph, shards, reduce_op, expect):
    # Scalars count as shape [1]: [1] + [2].
    reduced = _reduce_run(tf1_graph, shards, reduce_op, [1, 2], np.int32)
    _assert_count_equal(reduced, expect(sum, [1], [2]))


@REDUCTIONS
@pytest.mark.follows("testRank1Only")
def test_rank1_only(tf1_graph, shards, reduce_op, expect):
    shards(2)

    def my_net(zero):
        return reduce_op(_sharded(TWO_RANK_3, np.int32, zero), op="COLLECTIVE_OP_ADD")

    with pytest.raises(ValueError):
        _compile(my_net)


@REDUCTIONS
@pytest.mark.follows("testGrad")
def test_grad(tf1_graph, shards, reduce_op, expect):
    shards(2)

    def my_net(zero):
        shard0, shard1 = _sharded([[1, 1], [2, 2]], np.float32, zero)
        with tf.GradientTape() as tape:
            tape.watch([shard0, shard1])
            reduced = reduce_op([shard0, shard1], op="COLLECTIVE_OP_ADD")
            loss = tf.reduce_mean(reduced[0] ** 2) + tf.reduce_mean(reduced[1] ** 2)
        return tape.gradient(loss, [shard0, shard1])

    grads = _run(tf1_graph, _compile(my_net))
    assert isinstance(grads, list)
    # Reduce-scatter: [3] on each shard, d loss / d reduced = 6, gathered back to both
    # elements; all-reduce: [3, 3] on each shard, d loss = 3 per element from each shard.
    _assert_count_equal(grads, [[6.0, 6.0]] * 2)
