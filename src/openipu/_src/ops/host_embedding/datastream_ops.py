"""The host-embedding operations of the original's generated op module.

`tensorflow.compiler.plugin.poplar.ops.gen_pop_datastream_ops`: programs (and the
original's own tests) drive a host embedding with them directly, naming it by an
`embedding_id` instead of holding a `HostEmbedding`. The device operations
(`ipu_device_embedding_lookup`, `_update_add`, `_notify`) are built into a program
before the table is registered; so here the host keeps, per graph and embedding id,
a buffer of the embedding's shape (`host_table.HostTableState`), which
`ipu_host_embedding_register` fills from the table variable and
`ipu_host_embedding_deregister` writes back into it. With the "SGD+GA" optimizer the
updates wait on the host until `ipu_device_embedding_notify` (the original's host
held them until the device's notification); with "SGD" they are added at once.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref

import tensorflow as tf
from tensorflow.python.framework import ops

from openipu._src.engine.engine_variables import engine_variable
from openipu._src.ops.host_embedding import host_table

OPTIMIZERS = (host_table.SGD, host_table.SGD_WITH_ACCUMULATION)
PARTITION_STRATEGIES = ("ENCODING", "TOKEN")
# Updates wait for the notification: the count never reaches this by itself.
_NEVER = 2**31 - 1


@dataclasses.dataclass
class _Embedding:
    """The host's side of one embedding id in one graph."""

    buffer: tf.Variable
    state: host_table.HostTableState
    # Set when registered: True for "SGD+GA". The device operations are built before the
    # registration names the optimizer, so they read it when they run.
    accumulates: tf.Variable


_lock = threading.Lock()
# Per graph (forgotten with it): embedding id -> its host side.
_embeddings: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _in_graph() -> dict[str, _Embedding]:
    graph = ops.get_default_graph()
    with _lock:
        return _embeddings.setdefault(graph, {})


def _checked_id(embedding_id: str) -> str:
    # A string attribute of the original's operations: any str, "" included.
    if not isinstance(embedding_id, str):
        raise TypeError(f"embedding_id must be a str, got {embedding_id!r}")
    return embedding_id


def _embedding(embedding_id: str, shape, dtype) -> _Embedding:
    """The host side of `embedding_id` in this graph (its buffer made on first use)."""
    embeddings = _in_graph()
    embedding_id = _checked_id(embedding_id)
    shape = tf.TensorShape(shape)
    if shape.rank != 2 or not shape.is_fully_defined():
        raise ValueError(
            f"embedding_shape must be a fully defined rank-2 shape, got {shape} "
            f"(embedding {embedding_id!r})"
        )
    dtype = tf.as_dtype(dtype)
    embedding = embeddings.get(embedding_id)
    if embedding is None:
        with host_table.outside_region(), tf.init_scope():
            buffer = engine_variable(
                tf.zeros(shape, dtype), name=host_table.op_name(embedding_id, "host_buffer")
            )
            accumulates = engine_variable(
                False, name=host_table.op_name(embedding_id, "accumulates")
            )
        state = host_table.HostTableState(embedding_id, buffer, _NEVER)
        embedding = embeddings.setdefault(embedding_id, _Embedding(buffer, state, accumulates))
    if embedding.buffer.shape != shape or embedding.buffer.dtype != dtype:
        raise ValueError(
            f"embedding {embedding_id!r} is {embedding.buffer.shape} "
            f"{embedding.buffer.dtype.name}, not {shape} {dtype.name}"
        )
    return embedding


def ipu_host_embedding_register(
    ref, embedding_id: str, device_ordinal: int = 0, optimizer="SGD", name=None
):
    """Connects the table variable `ref` as the host embedding `embedding_id`."""
    del device_ordinal
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    embedding = _embedding(embedding_id, ref.shape, ref.dtype.base_dtype)
    with host_table.on_host():
        filled = embedding.buffer.assign(tf.convert_to_tensor(ref))
        mode = embedding.accumulates.assign(optimizer == host_table.SGD_WITH_ACCUMULATION)
        with tf.control_dependencies([filled, mode]):
            # Held updates of an earlier registration are dropped.
            registered = embedding.state.register(host_table.SGD_WITH_ACCUMULATION)
        with tf.control_dependencies([registered]):
            return tf.identity(ref, name=name or host_table.op_name(embedding_id, "register"))


def ipu_host_embedding_deregister(ref, embedding_id: str, device_ordinal: int = 0, name=None):
    """Disconnects `embedding_id`, writing the host's table back into `ref`; its value."""
    del device_ordinal
    state = _embedding(embedding_id, ref.shape, ref.dtype.base_dtype).state
    with host_table.on_host():
        table = state.deregister()
        written = tf.compat.v1.assign(ref, table)
        with tf.control_dependencies([written]):
            return tf.identity(table, name=name or host_table.op_name(embedding_id, "deregister"))


def ipu_device_embedding_lookup(
    indices, embedding_id: str, embedding_shape, dtype, partition_strategy="ENCODING", name=None
):
    """The rows `indices` (rank 1) of the host embedding, for the device program."""
    _check_partition_strategy(partition_strategy)
    indices = tf.convert_to_tensor(indices)
    if indices.shape.rank != 1 or indices.shape[0] is None:
        raise ValueError(f"indices must be a rank-1 tensor of known length, got {indices.shape}")
    return _embedding(embedding_id, embedding_shape, dtype).state.lookup(indices)


def ipu_device_embedding_update_add(
    ins,
    grads,
    indices,
    embedding_id: str,
    embedding_shape,
    partition_strategy="ENCODING",
    name=None,
):
    """Adds `grads` into the rows `indices` of the host embedding (held until notified with
    "SGD+GA"). `ins` is the looked-up rows the update follows."""
    _check_partition_strategy(partition_strategy)
    grads = tf.convert_to_tensor(grads)
    indices = tf.convert_to_tensor(indices)
    shape = tf.TensorShape(embedding_shape)
    if grads.shape.rank != 2 or indices.shape.rank != 1:
        raise ValueError(
            f"grads must have rank 2 and indices rank 1, got {grads.shape} and {indices.shape}"
        )
    if indices.shape[0] != grads.shape[0]:
        raise ValueError(
            f"Dimension 0 of the indices and updates do not match {indices.shape[0]} != "
            f"{grads.shape[0]}."
        )
    if shape.rank == 2 and grads.shape[1] != shape[1]:
        raise ValueError(
            f"Dimension 1 of the updates and embedding_shape do not match {grads.shape[1]} != "
            f"{shape[1]}."
        )
    embedding = _embedding(embedding_id, shape, grads.dtype)
    # The update follows the lookup it belongs to. It is held on the host; with "SGD" it is
    # added into the table at once.
    with tf.control_dependencies([tf.convert_to_tensor(ins)]):
        held = embedding.state.update(indices, grads, host_table.SGD_WITH_ACCUMULATION)
    with tf.control_dependencies(tf.nest.flatten(held)):
        return embedding.state.notify_unless(embedding.accumulates)


def ipu_device_embedding_notify(embedding_id: str, name=None):
    """Tells the host that the updates of a step are complete: held updates are added."""
    embedding = _in_graph().get(_checked_id(embedding_id))
    if embedding is None:
        raise ValueError(f"no host embedding {embedding_id!r} is used in this graph")
    return embedding.state.notify()


def _check_partition_strategy(value) -> None:
    if value not in PARTITION_STRATEGIES:
        raise ValueError(f"partition_strategy must be one of {PARTITION_STRATEGIES}, got {value!r}")
