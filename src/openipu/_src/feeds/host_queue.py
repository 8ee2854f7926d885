"""Host-side storage for outfeed data: unbounded FIFO queues, one per replica.

TensorFlow's FIFOQueue is a native resource that works the same in TF1
sessions, TF2 functions and eagerly, so enqueues from compiled programs and
dequeues from the host need no Python in between.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops

_UNBOUNDED = -1  # a negative capacity means no limit: the device never blocks


class HostQueue:
    """One FIFO queue of flat tensor lists per replica, all with the same element specs."""

    def __init__(self, specs: list[tf.TensorSpec], replicas: int, name: str) -> None:
        self.specs = specs
        self.replicas = replicas
        dtypes = [s.dtype for s in specs]
        shapes = [s.shape for s in specs]
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

    def enqueue(self, flat_values: list[tf.Tensor], replica: int = 0) -> ops.Operation | None:
        return self._queues[replica].enqueue(flat_values)

    def enqueue_many(self, flat_stacked: list[tf.Tensor], replica: int = 0) -> ops.Operation | None:
        return self._queues[replica].enqueue_many(flat_stacked)

    def dequeue_all(self, replica: int = 0) -> list[tf.Tensor]:
        """Everything enqueued so far, stacked along a new first axis (which may be 0 long)."""
        queue = self._queues[replica]
        values = queue.dequeue_many(queue.size())
        return list(values) if isinstance(values, (list, tuple)) else [values]

    def size(self, replica: int = 0) -> tf.Tensor:
        return self._queues[replica].size()

    def close(self) -> list:
        return [q.close(cancel_pending_enqueues=True) for q in self._queues]
