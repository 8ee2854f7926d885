"""How the host reads an infeed's dataset: the host half of an IPU data stream.

Device loops ask for N elements at once. Fetching them one by one in a host
loop costs tens of microseconds per element, more than many loop bodies, so
in TF2 the dataset is read in *chunks* of N elements, batched by tf.data on
its own threads (`ChunkedStream`). A request for another count is served
through a host queue of leftover elements, so elements always arrive in
dataset order and none is skipped.

TF1 sessions initialise their iterator explicitly (`infeed.initializer`)
before the loops that use it are known, so there the stream reads single
elements (`ElementStream`), as it does from a user's own `tf.data` iterator
read by a fused autograph loop (`fetch_from_iterator`): such an iterator is
shared with the rest of the program, so it is never read ahead.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_dataset_ops
from tensorflow.python.util import nest

_UNBOUNDED = -1
# Up to this many elements are fetched by a straight chain of ops; more by a host loop, whose
# per-iteration cost is higher but whose graph does not grow with the count.
_UNROLLED_FETCH_LIMIT = 32


def fetch_from_iterator(handle: tf.Tensor, element_spec, count: int | tf.Tensor, after=()):
    """The next `count` elements of the iterator behind `handle`, stacked along a new first axis.

    Reads exactly `count` elements, in order, and no more: the iterator may also be
    read elsewhere. `IteratorGetNextSync` costs about half as much per element as
    `IteratorGetNext`, whose asynchronous dispatch buys nothing in a sequential read.
    `after`: operations that must run before the first read (earlier reads of the
    same iterator). Builds host operations; call it on the host.
    """
    flat_specs = nest.flatten(element_spec)
    types = [s.dtype for s in flat_specs]
    shapes = [s.shape for s in flat_specs]

    def read_one():
        return gen_dataset_ops.iterator_get_next_sync(
            handle, output_types=types, output_shapes=shapes
        )

    static_count = tf.get_static_value(count)
    with ops.device("/device:CPU:0"), tf.control_dependencies(list(after)):
        if static_count is not None and static_count <= _UNROLLED_FETCH_LIMIT:
            elements = []
            for _ in range(int(static_count)):
                with tf.control_dependencies(elements[-1][:1] if elements else []):
                    elements.append(read_one())
            stacked = [
                tf.stack([e[i] for e in elements]) if elements else tf.zeros([0, *s], t)
                for i, (t, s) in enumerate(zip(types, shapes, strict=True))
            ]
        else:
            arrays = [
                tf.TensorArray(t, size=count, element_shape=s)
                for t, s in zip(types, shapes, strict=True)
            ]

            def fetch(i, *arrays):
                element = read_one()
                return [i + 1] + [a.write(i, e) for a, e in zip(arrays, element, strict=True)]

            _, *arrays = tf.while_loop(
                lambda i, *_: i < count,
                fetch,
                [tf.constant(0, tf.int32)] + arrays,
                parallel_iterations=1,  # elements arrive in dataset order
                name="iterator_fetch",
            )
            stacked = [a.stack() for a in arrays]
    return nest.pack_sequence_as(element_spec, stacked)


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
        return fetch_from_iterator(
            self._iterator._iterator_resource,  # noqa: SLF001 - TF1 iterators expose no handle
            self.element_spec,
            count,
        )


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
