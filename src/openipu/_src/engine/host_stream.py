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
read by a fused autograph loop (`fetch_from_iterators`): such an iterator is
shared with the rest of the program, so it is never read ahead.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_dataset_ops
from tensorflow.python.util import nest

from openipu._src.engine import infeed_failures
from openipu._src.engine.engine_variables import engine_variable
from openipu._src.engine.value_types import Nested
from openipu._src.integration import dataset_iterators

_state = threading.local()

_UNBOUNDED = -1
# Up to this many elements are read by a straight chain of ops; more by a host loop, whose
# per-element cost is higher but whose graph does not grow with the count.
_UNROLLED_FETCH_LIMIT = 32


@contextlib.contextmanager
def read_for_replicas(replicas: int) -> Iterator[None]:
    """Stream reads built in the context feed a program of `replicas` replicas."""
    saved = getattr(_state, "replicas", 1)
    _state.replicas = replicas
    try:
        yield
    finally:
        _state.replicas = saved


def replicas_reading() -> int:
    """How many replicas the program whose stream reads are being built has."""
    replicas: int = getattr(_state, "replicas", 1)
    return replicas


# The original's words (driver/poplar_executor.cc), a FailedPreconditionError.
REPLICATION_MISMATCH = "has already been setup with a replication factor of"


def fetch_from_iterator(
    handle: tf.Tensor,
    element_spec: Nested,
    count: int | tf.Tensor,
    after: Iterable[tf.Operation | tf.Tensor] = (),
) -> Nested:
    """The next `count` elements of the iterator behind `handle`, stacked along a new first axis."""
    return fetch_from_iterators([(handle, element_spec)], [0], count, after)[0]


def fetch_from_iterators(
    sources: list[tuple[tf.Tensor, Nested]],
    order: list[int],
    iterations: int | tf.Tensor,
    after: Iterable[tf.Operation | tf.Tensor] = (),
) -> list[Nested]:
    """Reads the sequence `order` `iterations` times; each source's elements, stacked.

    `sources` holds (iterator handle, element spec) pairs and `order` indexes them
    in the order one iteration of a loop reads them. The reads happen in exactly that
    order, and no more of them: an iterator may be read elsewhere too, and two
    handles may be the same iterator. `IteratorGetNextSync` costs about half as much
    per element as `IteratorGetNext`, whose asynchronous dispatch buys nothing here.
    `after`: operations the first read waits for. Builds host operations.
    """
    flat_specs = [nest.flatten(spec) for _, spec in sources]
    reads_per_iteration = [order.count(source) for source in range(len(sources))]

    def read(source: int) -> list[tf.Tensor]:
        specs = flat_specs[source]
        parts: list[tf.Tensor] = gen_dataset_ops.iterator_get_next_sync(
            sources[source][0],
            output_types=[s.dtype for s in specs],
            output_shapes=[s.shape for s in specs],
        )
        return parts

    def read_iteration(
        previous: list[tf.Tensor],
    ) -> tuple[list[list[list[tf.Tensor]]], list[tf.Tensor]]:
        """One iteration's reads, chained after `previous`: per source, per read, its parts."""
        elements: list[list[list[tf.Tensor]]] = [[] for _ in sources]
        for source in order:
            with tf.control_dependencies(previous):
                element = read(source)
            previous = element[:1]
            elements[source].append(element)
        return elements, previous

    static_iterations = tf.get_static_value(iterations)
    with ops.device("/device:CPU:0"), tf.control_dependencies(list(after)):
        if (
            static_iterations is not None
            and static_iterations * len(order) <= _UNROLLED_FETCH_LIMIT
        ):
            columns: list[list[list[tf.Tensor]]] = [[[] for _ in specs] for specs in flat_specs]
            previous: list[tf.Tensor] = []
            for _ in range(int(static_iterations)):
                elements, previous = read_iteration(previous)
                for source, reads in enumerate(elements):
                    for element in reads:
                        for column, part in zip(columns[source], element, strict=True):
                            column.append(part)
            stacked = [
                [
                    tf.stack(column) if column else tf.zeros([0, *spec.shape], spec.dtype)
                    for column, spec in zip(columns[source], specs, strict=True)
                ]
                for source, specs in enumerate(flat_specs)
            ]
        else:
            arrays = [
                [
                    tf.TensorArray(
                        spec.dtype,
                        size=iterations * reads_per_iteration[source],
                        element_shape=spec.shape,
                    )
                    for spec in specs
                ]
                for source, specs in enumerate(flat_specs)
            ]

            def fetch(i: tf.Tensor, *flat_arrays: tf.TensorArray) -> list[object]:
                arrays = nest.pack_sequence_as(flat_specs, list(flat_arrays))
                elements, _ = read_iteration([])
                for source, reads in enumerate(elements):
                    for position, element in enumerate(reads):
                        index = i * reads_per_iteration[source] + position
                        arrays[source] = [
                            array.write(index, part)
                            for array, part in zip(arrays[source], element, strict=True)
                        ]
                return [i + 1, *nest.flatten(arrays)]

            _, *flat_arrays = tf.while_loop(
                lambda i, *_: i < iterations,
                fetch,
                [tf.constant(0, tf.int32), *nest.flatten(arrays)],
                parallel_iterations=1,  # one iteration's reads after another's
                name="iterator_fetch",
            )
            stacked = [
                [array.stack() for array in arrays]
                for arrays in nest.pack_sequence_as(flat_specs, flat_arrays)
            ]
    return [
        nest.pack_sequence_as(spec, parts)
        for (_, spec), parts in zip(sources, stacked, strict=True)
    ]


class ElementStream:
    """Reads one element at a time from an initialisable iterator (TF1 graphs)."""

    def __init__(self, dataset: tf.data.Dataset, prefetch_depth: int) -> None:
        self.element_spec = dataset.element_spec
        self._iterator = tf.compat.v1.data.make_initializable_iterator(
            dataset.prefetch(prefetch_depth)
        )
        # Whether the initializer ran (and no deleter since): engine state of the graph.
        self._live = engine_variable(False, name="infeed_initialized")
        # The replicas of the first program that read the stream since it was initialised
        # (0: none read it yet): a program of other replicas cannot read it, as on the IPU.
        self._replicas = engine_variable(0, name="infeed_replicas")

    @property
    def initializer(self) -> tf.Operation:
        with tf.control_dependencies([self._iterator.initializer]):
            return tf.group(
                self._live.assign(True, read_value=False),
                self._replicas.assign(0, read_value=False),
            )

    def _claim(self, replicas: int, feed: str) -> tf.Operation:
        """Records that a program of `replicas` replicas reads the stream; fails (when it
        runs) if a program of another replica count read it first."""
        recorded = self._replicas.read_value()
        agreed = tf.logical_or(tf.equal(recorded, 0), tf.equal(recorded, replicas))
        check = tf.debugging.Assert(
            agreed,
            [
                f"Iterator for feed {feed} {REPLICATION_MISMATCH}",
                recorded,
                f"when it should have {replicas}: an infeed cannot be shared by programs of "
                "different replica counts; create a new IPUInfeedQueue.",
            ],
        )
        with tf.control_dependencies([check]):
            return self._replicas.assign(replicas, read_value=False)

    def deleter(self, not_initialized_message: str) -> tf.Operation:
        """Releases the iterator; fails with `not_initialized_message` when there is none
        (the initializer did not run, or a deleter ran since)."""
        check = tf.debugging.Assert(self._live.read_value(), [not_initialized_message])
        with tf.control_dependencies([check]):
            return tf.group(self._live.assign(False, read_value=False))

    def fetch_one(self) -> Nested:
        with ops.device("/device:CPU:0"), infeed_failures.dataset_reads():
            return self._iterator.get_next()

    def fetch_stacked(self, count: int, feed: str) -> Nested:
        """The next `count` elements, for a program of `replicas_reading()` replicas."""
        with ops.device("/device:CPU:0"):
            claim = self._claim(replicas_reading(), feed)
        with infeed_failures.dataset_reads():
            return fetch_from_iterator(
                self._iterator._iterator_resource,  # noqa: SLF001 - TF1 iterators expose no handle
                self.element_spec,
                count,
                after=[claim],
            )


class ChunkedStream:
    """Reads the dataset in chunks of the size the first request asks for (TF2)."""

    def __init__(self, dataset: tf.data.Dataset, prefetch_depth: int) -> None:
        self.element_spec = dataset.element_spec
        self._dataset = dataset
        self._prefetch_depth = prefetch_depth
        self._chunk_size: int | None = None
        self._chunks: tf.data.Iterator | None = None
        flat_specs = nest.flatten(self.element_spec)
        with tf.init_scope(), ops.device("/device:CPU:0"):
            self._leftovers = tf.queue.FIFOQueue(
                _UNBOUNDED, [s.dtype for s in flat_specs], [s.shape for s in flat_specs]
            )

    def release(self) -> None:
        self._chunks = None
        self._chunk_size = None

    def _chunk_iterator(self, count: int) -> tf.data.Iterator:
        if self._chunks is None:
            self._chunk_size = max(count, 1)
            with tf.init_scope(), ops.device("/device:CPU:0"):
                chunked = self._dataset.batch(self._chunk_size, drop_remainder=True)
                # Chunks prepare in the background while the device computes.
                chunked = chunked.prefetch(max(1, self._prefetch_depth // 2))
                # Read here, on the host: the stock iterator even in an IPUStrategy scope.
                self._chunks = dataset_iterators.stock_iterator(chunked)
        return self._chunks

    def fetch_stacked(self, count: int) -> Nested:
        chunks = self._chunk_iterator(count)
        with ops.device("/device:CPU:0"), infeed_failures.dataset_reads():
            if count == self._chunk_size:
                flat = tf.cond(
                    self._leftovers.size() > 0,
                    lambda: self._through_leftovers(chunks, count),
                    lambda: nest.flatten(chunks.get_next()),
                )
            else:
                flat = self._through_leftovers(chunks, count)
        return nest.pack_sequence_as(self.element_spec, nest.flatten(flat))

    def fetch_one(self) -> Nested:
        return nest.map_structure(lambda t: t[0], self.fetch_stacked(1))

    def _through_leftovers(self, chunks: tf.data.Iterator, count: int) -> list[tf.Tensor]:
        """`count` elements, topping up the leftover queue with whole chunks first."""

        def top_up(chunks_read: tf.Tensor) -> tf.Tensor:
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
