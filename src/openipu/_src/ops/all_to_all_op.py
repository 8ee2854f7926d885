"""All-gather and all-to-all across replicas (`ipu.all_to_all_op`)."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.int_like import as_attr_int
from openipu._src.ops import collectives


@collectives.collective_builder()
def all_gather(x, replication_factor: int, name: str | None = None):
    """`[replication_factor, *x.shape]`: the `x` of every replica of this replica's group.

    `x` may be a tensor or a list (or tuple) of tensors; each is gathered.
    """
    with tf.name_scope(name or "all_gather"):
        group = collectives.replica_group(replication_factor, "replication_factor", "all_gather")
        if isinstance(x, (list, tuple)):
            return type(x)(collectives.group_gather(tf.convert_to_tensor(t), group) for t in x)
        return collectives.group_gather(tf.convert_to_tensor(x), group)


@collectives.collective_builder()
def all_to_all(
    x,
    split_dimension: int,
    concat_dimension: int,
    replication_factor: int,
    name: str | None = None,
) -> tf.Tensor:
    """XLA's AllToAll within each group of `replication_factor` replicas.

    Every replica splits `x` into `replication_factor` blocks along
    `split_dimension` and sends block i to the i-th replica of its group; each
    replica concatenates the blocks it receives along `concat_dimension`, in the
    order of the senders.
    """
    with tf.name_scope(name or "all_to_all"):
        x = tf.convert_to_tensor(x)
        group = collectives.replica_group(replication_factor, "replication_factor", "all_to_all")
        rank = x.shape.rank
        # Int attributes of the original's op, which TensorFlow converts with int(): NumPy
        # ints and 1.0 work, a str is a TypeError.
        split_dimension = as_attr_int(split_dimension, "all_to_all: split_dimension")
        concat_dimension = as_attr_int(concat_dimension, "all_to_all: concat_dimension")
        for label, dimension in (
            ("split_dimension", split_dimension),
            ("concat_dimension", concat_dimension),
        ):
            if rank is None or not 0 <= dimension < rank:
                raise ValueError(
                    f"all_to_all: {label} must be in [0, {rank}) for a tensor of shape "
                    f"{x.shape}, got {dimension}"
                )
        split_size = x.shape[split_dimension]
        if split_size is None or split_size % group.size:
            raise ValueError(
                f"all_to_all: dimension {split_dimension} of x (size {split_size}) must be "
                f"a multiple of replication_factor={group.size}"
            )
        senders = collectives.group_gather(x, group)

        def receive(index: int, gathered: tf.Tensor) -> tf.Tensor:
            position = group.in_replica(index).position
            received = [
                tf.split(gathered[sender], group.size, axis=split_dimension)[position]
                for sender in range(group.size)
            ]
            return tf.concat(received, axis=concat_dimension)

        return collectives.per_replica(receive, senders)
