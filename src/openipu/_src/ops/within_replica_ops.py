"""Collectives over the shards of one replica (`ipu.within_replica_ops`).

The shards of a replica are the IPUs one copy of a sharded model spans; their
tensors come as a list in shard order (element i lives on shard i) and the
results go back as a tuple, element i for shard i. Everything is on the host,
so these are operations on the list.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.ops import collectives


def all_gather(input_shards, axis: int = 0) -> tuple:
    """Every shard gets `tf.concat(input_shards, axis)`."""
    shards = _check_shards(input_shards, "all_gather")
    ranks = {shard.shape.rank for shard in shards}
    if len(ranks) != 1:
        raise ValueError(f"all_gather: input_shards must all have the same rank, got {ranks}")
    gathered = tf.concat(shards, axis=axis)
    return tuple(tf.identity(gathered) for _ in shards)


def all_reduce(input_shards, op: str) -> tuple:
    """Every shard gets the elementwise `op` of all shards, shorter ones zero-padded.

    Inputs have rank 0 (one element) or 1; the result has the length of the
    longest input, and is a scalar when every input is.
    """
    shards = _check_shards(input_shards, "all_reduce")
    op = collectives.check_collective_op(op, "all_reduce")
    reduced = _reduce_padded(shards, op, "all_reduce")
    if all(shard.shape.rank == 0 for shard in shards):
        reduced = tf.reshape(reduced, [])
    return tuple(tf.identity(reduced) for _ in shards)


def reduce_scatter(input_shards, op: str) -> tuple:
    """The elementwise `op` of all shards, cut into one zero-padded slice per shard.

    With S shards and n reduced elements, slice j holds elements
    [j * m, (j + 1) * m) with m = ceil(n / S). The spec's one example (four
    shards, three elements) places them out of order: shard 0 gets the last
    slice, the last shard the first, the others their own; openipu follows
    that placement for every shard count.
    """
    shards = _check_shards(input_shards, "reduce_scatter")
    op = collectives.check_collective_op(op, "reduce_scatter")
    reduced = _reduce_padded(shards, op, "reduce_scatter")
    count = len(shards)
    slice_length = -(-reduced.shape[0] // count)
    padded = tf.pad(reduced, [[0, slice_length * count - reduced.shape[0]]])
    slices = tf.split(padded, count)
    return tuple(tf.identity(slices[_slice_of_shard(shard, count)]) for shard in range(count))


def _slice_of_shard(shard: int, count: int) -> int:
    if shard == 0:
        return count - 1
    if shard == count - 1:
        return 0
    return shard


def _check_shards(input_shards, what: str) -> list[tf.Tensor]:
    if isinstance(input_shards, tf.Tensor) or not isinstance(input_shards, (list, tuple)):
        raise TypeError(f"{what}: input_shards must be a list of tensors, one per shard")
    if not input_shards:
        raise ValueError(f"{what}: input_shards is empty: give one tensor per shard")
    # The original's rules and exception types (_validate_inputs in ops/within_replica_ops.py):
    # each shard's tensor is a different tensor, all of one dtype.
    refs = [shard.ref() for shard in input_shards if tf.is_tensor(shard)]
    if len(set(refs)) != len(refs):
        raise ValueError(
            f"{what}: input_shards should not contain any duplicate entries (each shard gives "
            "its own tensor)"
        )
    shards = [tf.convert_to_tensor(shard) for shard in input_shards]
    dtypes = {shard.dtype for shard in shards}
    if len(dtypes) != 1:
        names = sorted(dtype.name for dtype in dtypes)
        raise ValueError(f"{what}: input_shards must all have the same dtype, got {names}")
    return shards


def _reduce_padded(shards: list[tf.Tensor], op: str, what: str) -> tf.Tensor:
    collectives.check_operand_dtype(op, shards[0].dtype, what)
    for shard in shards:
        if shard.shape.rank not in (0, 1) or shard.shape.num_elements() is None:
            raise ValueError(
                f"{what}: every shard must have rank 0 or 1 and a known length, "
                f"got shape {shard.shape}"
            )
    vectors = [tf.reshape(shard, [-1]) for shard in shards]
    length = max(vector.shape[0] for vector in vectors)
    padded = [tf.pad(vector, [[0, length - vector.shape[0]]]) for vector in vectors]
    return collectives.reduce_stack(op, tf.stack(padded))
