"""How the host reads an infeed's dataset: the host half of an IPU data stream.

Device loops ask for N elements at once. Fetching them one by one in a host
loop costs tens of microseconds per element, more than many loop bodies, so
in TF2 the dataset is read in *chunks* of N elements, batched by tf.data on
its own threads (`ChunkedStream`). A request for another count is served
through a host queue of leftover elements, so elements always arrive in
dataset order and none is skipped.

TF1 sessions initialise their iterator explicitly (`infeed.initializer`)
before the loops that use it are known, so there the stream reads single
elements (`ElementStream`).
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

_UNBOUNDED = -1


class ElementStream:
    """Reads one element at a time from an initialisable iterator (TF1 graphs)."""

    def __init__(self, dataset: tf.data.Dataset, prefetch_depth: int) -> None:
        self.element_spec = dataset.element_spec
        self._iterator = tf.compat.v1.data.make_initializable_iterator(
            dataset.prefetch(prefetch_depth)
        )

    @property
    def initializer(self) -> tf.Operation:
        return self._iterator.initializer

    def fetch_one(self):
        with ops.device("/device:CPU:0"):
            return self._iterator.get_next()

    def fetch_stacked(self, count: int):
        flat_specs = nest.flatten(self.element_spec)
        arrays = [
            tf.TensorArray(spec.dtype, size=count, element_shape=spec.shape) for spec in flat_specs
        ]

        def fetch(i, *arrays):
            element = nest.flatten(self._iterator.get_next())
            return [i + 1] + [a.write(i, e) for a, e in zip(arrays, element, strict=True)]

        with ops.device("/device:CPU:0"):
            _, *arrays = tf.while_loop(
                lambda i, *_: i < count,
                fetch,
                [tf.constant(0, tf.int32)] + arrays,
                parallel_iterations=1,  # elements arrive in dataset order
                name="infeed_fetch",
            )
            stacked = [a.stack() for a in arrays]
        return nest.pack_sequence_as(self.element_spec, stacked)


class ChunkedStream:
    """Reads the dataset in chunks of the size the first request asks for (TF2)."""

    def __init__(self, dataset: tf.data.Dataset, prefetch_depth: int) -> None:
        self.element_spec = dataset.element_spec
        self._dataset = dataset
        self._prefetch_depth = prefetch_depth
        self._chunk_size: int | None = None
        self._chunks = None
        flat_specs = nest.flatten(self.element_spec)
        with tf.init_scope(), ops.device("/device:CPU:0"):
            self._leftovers = tf.queue.FIFOQueue(
                _UNBOUNDED, [s.dtype for s in flat_specs], [s.shape for s in flat_specs]
            )

    def release(self) -> None:
        self._chunks = None
        self._chunk_size = None

    def _chunk_iterator(self, count: int):
        if self._chunks is None:
            self._chunk_size = max(count, 1)
            with tf.init_scope(), ops.device("/device:CPU:0"):
                chunked = self._dataset.batch(self._chunk_size, drop_remainder=True)
                # Chunks prepare in the background while the device computes.
                self._chunks = iter(chunked.prefetch(max(1, self._prefetch_depth // 2)))
        return self._chunks

    def fetch_stacked(self, count: int):
        chunks = self._chunk_iterator(count)
        with ops.device("/device:CPU:0"):
            if count == self._chunk_size:
                flat = tf.cond(
                    self._leftovers.size() > 0,
                    lambda: self._through_leftovers(chunks, count),
                    lambda: nest.flatten(chunks.get_next()),
                )
            else:
                flat = self._through_leftovers(chunks, count)
        return nest.pack_sequence_as(self.element_spec, nest.flatten(flat))

    def fetch_one(self):
        return nest.map_structure(lambda t: t[0], self.fetch_stacked(1))

    def _through_leftovers(self, chunks, count: int) -> list[tf.Tensor]:
        """`count` elements, topping up the leftover queue with whole chunks first."""

        def top_up(chunks_read):
            enqueue = self._leftovers.enqueue_many(nest.flatten(chunks.get_next()))
            with tf.control_dependencies([enqueue]):
                return chunks_read + 1

        loop = tf.while_loop(
            lambda _: self._leftovers.size() < count,
            top_up,
            [tf.constant(0)],
            parallel_iterations=1,
            name="infeed_top_up",
        )
        with tf.control_dependencies([loop]):
            values = self._leftovers.dequeue_many(count)
        return list(values) if isinstance(values, (list, tuple)) else [values]
