"""Embedding lookups on the IPU (`ipu.embedding_ops.embedding_lookup`).

Host embeddings (`HostEmbedding` and its optimiser specs) are in `ops/host_embedding`.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.ops.int_argument import as_int


def embedding_lookup(
    params, ids, name=None, serialization_factor: int = 1, indices_are_sorted: bool = False
) -> tf.Tensor:
    """Looks up `ids` in `params` (a drop-in for `tf.nn.embedding_lookup`).

    With `serialization_factor > 1` the lookup is split into that many lookups,
    each into a slice of `params` along dimension 0, and the results summed:
    the numbers are those of one lookup, ids outside `params` give zeros.
    `indices_are_sorted` (taken by the later original, ops/embedding_ops.py) is a hint
    for Poplar's slicing that changes no number: accepted and not needed here.
    """
    del indices_are_sorted
    # The original takes int(serialization_factor) (ops/embedding_ops.py).
    serialization_factor = as_int(serialization_factor, "embedding_lookup: serialization_factor")
    if serialization_factor < 1:
        # The original's words (tensorflow/python/ipu/ops/embedding_ops.py).
        raise ValueError(
            f"serialization_factor has to be at least 1, but was {serialization_factor}. "
            "(embedding_lookup)"
        )
    with tf.name_scope(name or "embedding_lookup"):
        params = tf.convert_to_tensor(params)
        ids = tf.convert_to_tensor(ids)
        if not ids.dtype.is_integer:
            raise TypeError(f"embedding_lookup: ids must be integers, got dtype {ids.dtype.name}")
        ids = tf.cast(ids, tf.int32)
        if params.shape.rank is not None and params.shape.rank < 1:
            raise ValueError(f"embedding_lookup: params must have rank >= 1, got {params.shape}")
        if serialization_factor == 1:
            return tf.gather(params, ids)
        return _serialized_lookup(params, ids, serialization_factor)


def _serialized_lookup(params: tf.Tensor, ids: tf.Tensor, factor: int) -> tf.Tensor:
    num_rows = params.shape[0]
    if num_rows is None:
        raise ValueError(
            "embedding_lookup: serialization needs dimension 0 of params to be known, "
            f"got shape {params.shape}"
        )
    if num_rows % factor:
        raise ValueError(
            f"The serialization_factor ({factor}) must divide the size of the 0th dimension "
            f"of params ({num_rows}). (embedding_lookup)"
        )
    rows_per_slice = num_rows // factor
    result = None
    for start in range(0, num_rows, rows_per_slice):
        local_ids = ids - start
        in_slice = (local_ids >= 0) & (local_ids < rows_per_slice)
        rows = tf.gather(params[start : start + rows_per_slice], tf.where(in_slice, local_ids, 0))
        mask = tf.reshape(
            in_slice, tf.concat([tf.shape(ids), tf.ones_like(tf.shape(params)[1:])], 0)
        )
        part = tf.where(mask, rows, tf.zeros_like(rows))
        result = part if result is None else result + part
    return result
