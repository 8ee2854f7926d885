"""Host-side storage for outfeed data: unbounded FIFO queues, one per replica.

TensorFlow's FIFOQueue is a native resource that works the same in TF1
sessions, TF2 functions and eagerly, so enqueues from compiled programs and
dequeues from the host need no Python in between.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops

from openipu._src.engine.replicas import lockstep

_UNBOUNDED = -1  # a negative capacity means no limit: the device never blocks


class HostQueue:
    """One FIFO queue of flat tensor lists per replica, all with the same element specs."""

    def __init__(self, specs: list[tf.TensorSpec], replicas: int, name: str) -> None:
        self.specs = specs
        self.replicas = replicas
        # TensorFlow's queues crash the process on elements of zero size (enqueue_many of
        # such stacks); an empty component is known from its spec, so a scalar stands in.
        self._empty = [s.shape.is_fully_defined() and s.shape.num_elements() == 0 for s in specs]
        dtypes = [
            tf.int8 if empty else s.dtype for s, empty in zip(specs, self._empty, strict=True)
        ]
        shapes = [[] if empty else s.shape for s, empty in zip(specs, self._empty, strict=True)]
        with tf.init_scope(), ops.device("/device:CPU:0"):
            self.graph = ops.get_default_graph()
            self._queues = [
                tf.queue.FIFOQueue(_UNBOUNDED, dtypes, shapes, name=f"{name}_replica{r}")
                for r in range(replicas)
            ]

    def matches(self, specs: list[tf.TensorSpec], replicas: int) -> bool:
        return replicas == self.replicas and [(s.dtype, s.shape) for s in specs] == [
            (s.dtype, s.shape) for s in self.specs
        ]

    def map_replicas(self) -> None:
        """In a program traced once, replica r's copies of an enqueue use replica r's queue.

        The queue is a resource its enqueue reads: also from a function nested in the
        program (a loop body), whose copies then get queue r as their input.
        """
        queues = self._queues
        lockstep.register(queues[0].queue_ref, lambda r: queues[r].queue_ref)

    def enqueue(self, flat_values: list[tf.Tensor], replica: int = 0) -> ops.Operation | None:
        values = [
            tf.zeros([], tf.int8) if empty else value
            for value, empty in zip(flat_values, self._empty, strict=True)
        ]
        return self._queues[replica].enqueue(values)

    def enqueue_many(self, flat_stacked: list[tf.Tensor], replica: int = 0) -> ops.Operation | None:
        count = tf.shape(flat_stacked[0])[0]
        values = [
            tf.zeros([count], tf.int8) if empty else value
            for value, empty in zip(flat_stacked, self._empty, strict=True)
        ]
        return self._queues[replica].enqueue_many(values)

    def dequeue_all(self, replica: int = 0) -> list[tf.Tensor]:
        """Everything enqueued so far, stacked along a new first axis (which may be 0 long)."""
        queue = self._queues[replica]
        values = queue.dequeue_many(queue.size())
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        return [
            tf.zeros(tf.concat([tf.shape(value), spec.shape.as_list()], 0), spec.dtype)
            if empty
            else value
            for value, spec, empty in zip(values, self.specs, self._empty, strict=True)
        ]

    def size(self, replica: int = 0) -> tf.Tensor:
        return self._queues[replica].size()

    def close(self) -> list[tf.Operation]:
        return [q.close(cancel_pending_enqueues=True) for q in self._queues]
