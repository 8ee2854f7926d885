"""`ipu.embedding_ops.HostEmbedding` and `create_host_embedding`: tables that live on the host.

The table is a host (CPU) tensor, normally a variable, outside the compiled
program. Programs look rows up with `lookup`, from inside the device loop; a
trainable embedding's rows are updated on the host by its optimizer spec. The
table must be registered with the session that runs the programs
(`with embedding.register(session):`), as on the original
(tensorflow/python/ipu/ops/embedding_ops.py).
"""

from __future__ import annotations

import functools
import operator

import tensorflow as tf
from tensorflow.python.framework import tensor_util

from openipu._src.ops.host_embedding.optimizer_spec import HostEmbeddingOptimizerSpec

PARTITION_STRATEGIES = ("TOKEN", "ENCODING")


class HostEmbedding:
    """Host Embedding wrapper: a rank-2 table `[tokens, encoding]` the IPU looks up on the host.

    `partition_strategy` ("TOKEN" or "ENCODING") says along which axis a
    remote-buffer table (`IPUConfig.experimental.enable_remote_buffer_embedding`)
    is split between replicas; it is kept, and on one host both give the same
    numbers. `optimizer_spec=None` makes the embedding constant.
    """

    def __init__(
        self,
        name: str,
        embedding_tensor,
        partition_strategy: str = "TOKEN",
        optimizer_spec: HostEmbeddingOptimizerSpec | None = None,
    ) -> None:
        # The original's checks, types and order.
        if not tensor_util.is_tensor(embedding_tensor):
            raise ValueError(
                "HostEmbedding embedding_tensor is not a tensorflow tensor, got "
                f"{type(embedding_tensor).__name__}"
            )
        if not isinstance(optimizer_spec, (type(None), HostEmbeddingOptimizerSpec)):
            raise ValueError(
                "HostEmbedding optimizer_spec is not a HostEmbeddingOptimizerSpec or None, got "
                f"{optimizer_spec!r}"
            )
        if optimizer_spec is None:
            optimizer_spec = HostEmbeddingOptimizerSpec(0)
        if partition_strategy not in PARTITION_STRATEGIES:
            raise ValueError(
                f"Unknown partition strategy {partition_strategy}: HostEmbedding "
                "partition_strategy must be 'TOKEN' or 'ENCODING'"
            )
        self._name = name
        self._embedding_tensor = embedding_tensor
        self._partition_strategy = partition_strategy
        self._optimizer_spec = optimizer_spec
        self._has_lookup = False
        self._slot_vars = optimizer_spec.create_slot_variables(embedding_tensor, name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def partition_strategy(self) -> str:
        return self._partition_strategy

    @property
    def optimizer_spec(self) -> HostEmbeddingOptimizerSpec:
        return self._optimizer_spec

    def get_embedding_tensor(self):
        """The host (CPU) tensor of the embedding."""
        return self._embedding_tensor

    def register(self, session=None) -> _HostEmbeddingScope:
        """A context manager that connects the table to `session`'s programs while it is open.

        A TF1 graph needs the session; when executing eagerly the connection is made directly.
        """
        if session is None and not tf.executing_eagerly():
            raise ValueError(
                "HostEmbedding.register requires a session when eager execution is disabled."
            )
        return _HostEmbeddingScope(self, session)

    def __call__(self, *args, **kwargs):
        # As the original: the old form is kept only to point to the new one.
        raise NotImplementedError(
            "HostEmbedding.__call__ is not supported. "
            "Please use the context manager created with HostEmbedding.register."
        )

    def lookup(self, indices, clip_indices: bool = True) -> tf.Tensor:
        """The rows `indices` of the table, `indices.shape + [encoding]`, inside an IPU program.

        With `clip_indices` the indices are clipped into `[0, tokens - 1]`; without,
        an index out of range is an error of the host's lookup.
        """
        indices = tf.convert_to_tensor(indices)
        if not indices.dtype.is_integer:
            raise TypeError(
                f"HostEmbedding.lookup: indices must be integers, got dtype {indices.dtype.name}"
            )
        indices = tf.cast(indices, tf.int32)
        table_shape = self._embedding_tensor.shape
        if clip_indices:
            indices = tf.clip_by_value(indices, 0, table_shape[0] - 1)
        static_shape = indices.shape.as_list()
        if None in static_shape:
            indices_shape = tf.shape(indices)
            flat = tf.reshape(indices, [-1])
        else:
            indices_shape = static_shape
            flat = tf.reshape(indices, [functools.reduce(operator.mul, static_shape, 1)])
        rows = self._optimizer_spec.create_lookup_instruction(
            self._embedding_tensor, flat, self._slot_vars, self._partition_strategy, self._name
        )
        self._has_lookup = True
        return tf.reshape(rows, tf.concat([indices_shape, [table_shape[1]]], 0))


class _HostEmbeddingScope:
    """Keeps a host embedding registered with a session while open (`HostEmbedding.register`)."""

    def __init__(self, parent: HostEmbedding, session=None) -> None:
        self._parent = parent
        self._session = session

    def _run(self, create_instruction) -> None:
        """Builds the spec's instruction (run eagerly when no session) and runs it."""
        parent = self._parent
        instruction = create_instruction(
            parent._embedding_tensor,  # noqa: SLF001
            parent._slot_vars,  # noqa: SLF001
            parent._name,  # noqa: SLF001
        )
        if self._session is not None:
            self._session.run(instruction)

    def __enter__(self) -> HostEmbedding:
        self._run(self._parent.optimizer_spec.create_register_instruction)
        return self._parent

    def __exit__(self, exception_type, exception_value, traceback) -> None:
        self._run(self._parent.optimizer_spec.create_deregister_instruction)


def create_host_embedding(
    name: str,
    shape,
    dtype,
    partition_strategy: str = "TOKEN",
    optimizer_spec: HostEmbeddingOptimizerSpec | None = None,
    initializer=None,
) -> HostEmbedding:
    """A `HostEmbedding` holding a new host variable `name` of `shape` and `dtype`.

    `initializer` is a value or an initializer (called with the shape and dtype);
    None means zeros.
    """
    dtype = tf.as_dtype(dtype)
    if initializer is None:
        initial_value = lambda: tf.zeros(shape, dtype)  # noqa: E731
    elif callable(initializer):
        initial_value = lambda: initializer(shape, dtype=dtype)  # noqa: E731
    else:
        initial_value = lambda: tf.convert_to_tensor(initializer, dtype)  # noqa: E731
    with tf.init_scope(), tf.device("/device:CPU:0"):
        embedding_tensor = tf.Variable(initial_value, dtype=dtype, name=name)
    return HostEmbedding(
        name,
        embedding_tensor,
        partition_strategy=partition_strategy,
        optimizer_spec=optimizer_spec,
    )
