"""`IPUIterator` and `IPUOwnedIterator`: a dataset's elements read with `next()` in programs.

As the original's (ipu_infeed_queue.py): the iterator wraps an `IPUInfeedQueue` of the
dataset, created (and initialised) when the iterator is, and each `next()` inside a
`tf.function` dequeues the next element on the device; reading elements eagerly is refused
with the original's message. Here the iterator is a plain Python object, which tf.function
takes as an argument by identity (the original made it a composite tensor); an iterator
can also be rebuilt from another's `infeed_spec` and `element_spec`, reading its feed.

`iter(dataset)` in an IPUStrategy scope gives a `DatasetIPUOwnedIterator`: an
`IPUOwnedIterator` that refuses eager reads as the original's, but is a stock
`OwnedIterator` of the dataset too, so programs read it as the engine reads any
`tf.data` iterator (streamed and fused into device loops, `engine/autograph_loops.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import iterator_ops
from tensorflow.python.framework import ops

from openipu._src.engine import autograph_loops, replication
from openipu._src.feeds.infeed import IPUInfeedQueue, IPUInfeedQueueSpec


class IPUIterator(Iterator[Any]):
    """An iterator over a `tf.data.Dataset` whose elements programs read on the IPU."""

    def __init__(
        self,
        dataset: tf.data.Dataset | None = None,
        infeed_spec: object = None,
        element_spec: object = None,
        **kwargs: Any,
    ) -> None:
        message = "Either `dataset` or both `infeed_spec` and `element_spec` need to be provided."
        if dataset is None:
            # Rebuilt from the type spec of another iterator's infeed: it reads that feed.
            if infeed_spec is None or element_spec is None:
                raise ValueError(message)
            if not isinstance(infeed_spec, IPUInfeedQueueSpec):
                raise TypeError(
                    "IPUIterator: infeed_spec must be the `infeed_spec` of another IPUIterator, "
                    f"got {type(infeed_spec).__name__}"
                )
            self._infeed_queue = infeed_spec._from_components(None)  # noqa: SLF001
            self._element_spec = element_spec
            return
        if infeed_spec is not None or element_spec is not None:
            raise ValueError(message)
        self._infeed_queue = IPUInfeedQueue(dataset, **kwargs)
        self._infeed_queue.initializer  # noqa: B018 - the original initialises it here
        self._element_spec = dataset.element_spec

    def __iter__(self) -> IPUIterator:
        return self

    def __next__(self) -> Any:
        try:
            return self._next_internal()
        except tf.errors.OutOfRangeError:
            raise StopIteration from None

    def next(self) -> Any:
        return self.__next__()

    def get_next(self) -> Any:
        return self._next_internal()

    def _next_internal(self) -> Any:
        _refuse_eager_reads()
        if replication.current_replica_count() > 1:
            # Replicas read their own elements in turn through a device loop.
            return self._infeed_queue._dequeue()  # noqa: SLF001 - the queue's element read
        # One replica: the host's next element, which also works inside the program's own
        # loops (a `for` over tf.range), as the original's iterators do.
        return self._infeed_queue._fetch_one()  # noqa: SLF001

    @property
    def element_spec(self) -> object:
        return self._element_spec

    @property
    def infeed_spec(self) -> IPUInfeedQueueSpec:
        """The type spec of the iterator's infeed, from which another iterator reads it."""
        return self._infeed_queue._type_spec  # noqa: SLF001

    @property
    def infeed_queue(self) -> IPUInfeedQueue:
        return self._infeed_queue

    def get_next_as_optional(self) -> Any:
        raise NotImplementedError("IPU Dataset iterator does not support get_next_as_optional().")

    def _gather_saveables_for_checkpoint(self) -> Any:
        raise NotImplementedError("IPU Dataset iterator is not currently saveable.")


def _refuse_eager_reads() -> None:
    if tf.executing_eagerly():
        # The original's message (ipu_infeed_queue.py).
        raise RuntimeError(
            "Accessing dataset elements can not be accessed in eager mode when inside "
            "'IPUStrategy'. The dataset elements should be accessed inside of a "
            "'tf.function' with 'jit_compile=True' set in order to achieve optimal "
            "performance. See documentation for detailed examples. If this behavior is "
            "required please set 'enable_dataset_iterators=False' when creating an "
            "'IPUStrategy'."
        )


class IPUOwnedIterator(IPUIterator):
    """An `IPUIterator` whose infeed is released when the iterator is deleted."""

    def __del__(self) -> None:
        queue = getattr(self, "_infeed_queue", None)
        if queue is None:
            return
        try:
            # The collector may run this while a program is traced: release eagerly, outside.
            with ops.init_scope():
                if tf.executing_eagerly():
                    queue.deleter  # noqa: B018 - releases the host side
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown: nothing to release
            pass


class DatasetIPUOwnedIterator(IPUOwnedIterator, iterator_ops.OwnedIterator):
    """What `iter(dataset)` gives in an IPUStrategy scope (the strategy's iterator).

    A stock `OwnedIterator` of the dataset underneath: a program given it as an argument
    receives the stock iterator (its type spec), and one that captures it reads it through
    the stock `next()`, so both are streamed as any `tf.data` iterator is. Only eager reads
    are refused, as the original's. It has no infeed of its own (no `infeed_spec`).
    """

    def __init__(self, dataset: tf.data.Dataset) -> None:
        iterator_ops.OwnedIterator.__init__(self, dataset=dataset)

    def _next_internal(self) -> Any:
        _refuse_eager_reads()
        return iterator_ops.OwnedIterator._next_internal(self)  # noqa: SLF001

    @property
    def infeed_spec(self) -> IPUInfeedQueueSpec:
        raise AttributeError(
            "This IPUOwnedIterator, made by iter(dataset) in an IPUStrategy scope, reads its "
            "dataset as a tf.data iterator and has no infeed_spec; construct "
            "ipu_infeed_queue.IPUOwnedIterator(dataset) for one"
        )

    @property
    def infeed_queue(self) -> IPUInfeedQueue:
        raise AttributeError(
            "This IPUOwnedIterator, made by iter(dataset) in an IPUStrategy scope, reads its "
            "dataset as a tf.data iterator and has no infeed_queue; construct "
            "ipu_infeed_queue.IPUOwnedIterator(dataset) for one"
        )


# The engine reads it as it reads a stock iterator (fused loops, streamed inputs).
setattr(DatasetIPUOwnedIterator, autograph_loops.READ_AS_OWNED_ITERATOR, True)
