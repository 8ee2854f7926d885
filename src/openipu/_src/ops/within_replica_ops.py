"""Collectives over the shards of one replica (`ipu.within_replica_ops`).

The shards of a replica are the IPUs one copy of a sharded model spans; their
tensors come as a list in shard order (element i lives on shard i) and the
results go back as a tuple, element i for shard i. Everything is on the host,
so these are operations on the list.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.compiler import sharding
from openipu._src.ops import collectives


def all_gather(input_shards, axis: int = 0) -> list | tuple:
    """Every shard gets the shards' elements, flattened and concatenated in shard order,
    in the shape of `tf.concat(input_shards, axis)` (a list); scalars gather into a vector
    (a tuple). The original gathers the flattened shards and reshapes the result
    (tensorflow/python/ipu/ops/within_replica_ops.py), so for `axis` > 0 the elements are
    in shard order, not interleaved as a concatenation would place them."""
    shards = _check_shards(input_shards, "all_gather")
    gathered = tf.concat([tf.reshape(shard, [-1]) for shard in shards], axis=0)
    if shards[0].shape.rank == 0:
        return tuple(tf.identity(gathered) for _ in shards)
    shape = _concatenated_shape(shards, axis)
    return [tf.reshape(gathered, shape) for _ in shards]


def _concatenated_shape(shards: list[tf.Tensor], axis: int) -> list[int]:
    shape = shards[0].shape.as_list()
    if not -len(shape) <= axis < len(shape):
        raise ValueError(
            f"all_gather: axis must be in [{-len(shape)}, {len(shape)}) for input_shards of "
            f"rank {len(shape)}, got {axis}"
        )
    axis %= len(shape)
    for index, shard in enumerate(shards[1:], start=1):
        other = shard.shape.as_list()
        if other[:axis] != shape[:axis] or other[axis + 1 :] != shape[axis + 1 :]:
            # The original's words (ops/within_replica_ops.py, _concatenate_shapes).
            raise ValueError(
                "Expecting tensor dimensions to all have the same sizes, except for dim "
                f"{axis}, but got shapes {shards[0].shape.as_list()} and {other} for tensors 0 "
                f"and {index} (all_gather)"
            )
        shape[axis] += other[axis]
    return shape


def all_reduce(input_shards, op: str) -> tuple:
    """Every shard gets the elementwise `op` of all shards, shorter ones zero-padded.

    Inputs have rank 0 (one element, taken as shape [1], as the original does) or 1; the
    result has the length of the longest input.
    """
    shards = _check_shards(input_shards, "all_reduce")
    op = collectives.check_collective_op(op, "all_reduce")
    reduced = _reduce_padded(shards, op, "all_reduce")
    return tuple(tf.identity(reduced) for _ in shards)


def reduce_scatter(input_shards, op: str) -> tuple:
    """The elementwise `op` of all shards, scattered over the shards, zero-padded.

    With S shards and n reduced elements, the elements are dealt out in turn into S
    columns (element j to column j mod S, at position j // S; each column holds
    ceil(n / S), padded with zeros). The spec's one example (four shards, three elements)
    places the columns out of order: shard 0 gets the last column, the last shard the
    first, the others their own; openipu follows that placement for every shard count.
    The dealing follows the original's within_replicas_test.py, whose expected results
    spread more elements than shards one per shard in turn.
    """
    shards = _check_shards(input_shards, "reduce_scatter")
    op = collectives.check_collective_op(op, "reduce_scatter")
    reduced = _reduce_padded(shards, op, "reduce_scatter")
    count = len(shards)
    column_length = -(-reduced.shape[0] // count)
    padded = tf.pad(reduced, [[0, column_length * count - reduced.shape[0]]])
    columns = tf.unstack(tf.reshape(padded, [column_length, count]), axis=1)
    return tuple(tf.identity(columns[_column_of_shard(shard, count)]) for shard in range(count))


def _column_of_shard(shard: int, count: int) -> int:
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
    # The original's rules, exception types and words (_validate_inputs in
    # ops/within_replica_ops.py, for every op): each shard's tensor is a different tensor,
    # all of one dtype and one rank.
    refs = [shard.ref() for shard in input_shards if tf.is_tensor(shard)]
    if len(set(refs)) != len(refs):
        raise ValueError(
            f"input_shards should not contain any duplicate entries. ({what}: each shard gives "
            "its own tensor)"
        )
    shards = [tf.convert_to_tensor(shard) for shard in input_shards]
    dtypes = {shard.dtype for shard in shards}
    if len(dtypes) != 1:
        names = sorted(dtype.name for dtype in dtypes)
        raise ValueError(f"Expected tensors to all be of the same type. ({what}: got {names})")
    ranks = {shard.shape.rank for shard in shards}
    if len(ranks) != 1:
        listed = sorted(ranks, key=lambda rank: -1 if rank is None else rank)
        raise ValueError(f"Expected tensors to all be of the same rank. ({what}: got {listed})")
    _check_shard_order(shards)
    return shards


def _check_shard_order(shards: list[tf.Tensor]) -> None:
    """Input i must be on shard i where `ipu_shard` placed the inputs, as the original's
    compiler checks (FailedPreconditionError, its message; poplar driver's
    custom_ops/popops/within_replicas.cc). Raised when the program is built."""
    if tf.executing_eagerly():
        return
    for index, shard in enumerate(shards):
        placed = sharding.get_sharding(shard.op)
        if placed is not None and placed != [index]:
            raise tf.errors.FailedPreconditionError(
                None,
                None,
                f"'{shard.op.name}' has sharding {placed} but expected it to be on shard "
                f"{index}. Operands can only be sharded on 1 device and must be provided in "
                "incrementing shard order.",
            )


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
