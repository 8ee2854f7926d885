"""`IPUInfeedQueue`: a dataset streamed into device loops.

On a real IPU the host pushes dataset elements into a stream that the
device loop reads. Here the host fetches the elements a loop needs before
the loop's compiled region runs (see `engine.device_loop`), as one stacked
buffer, so the loop itself stays free of host operations. `host_stream`
holds how the host reads the dataset.
"""

from __future__ import annotations

import itertools
import weakref

import tensorflow as tf
from tensorflow.python.data.util import structure as data_structure
from tensorflow.python.framework import type_spec
from tensorflow.python.util import nest

from openipu._src.config import poplar_flags
from openipu._src.engine import device_loop, stream_dtypes
from openipu._src.engine.device_scope import validate_device_ordinal
from openipu._src.engine.host_stream import REPLICATION_MISMATCH, ChunkedStream, ElementStream
from openipu._src.feeds.synthetic_elements import synthetic_elements
from openipu._src.integration import run_errors

_MAX_PREFETCH_DEPTH = 256
_DEFAULT_PREFETCH_DEPTH = 3


def _validate_prefetch_depth(prefetch_depth) -> int | None:
    # The original takes `prefetch_depth or 3`: 0 means the default too.
    if prefetch_depth is None or (prefetch_depth == 0 and not isinstance(prefetch_depth, bool)):
        return None
    if isinstance(prefetch_depth, bool) or not isinstance(prefetch_depth, int):
        raise ValueError(f"prefetch_depth must be an int or None, got {prefetch_depth!r}")
    # The original's messages (ipu_infeed_queue.py).
    if prefetch_depth <= 0:
        raise ValueError(f"prefetch_depth must be greater than zero, but it is {prefetch_depth}")
    if prefetch_depth >= _MAX_PREFETCH_DEPTH:
        raise ValueError(
            f"prefetch_depth must be less than {_MAX_PREFETCH_DEPTH}, but it is {prefetch_depth}"
        )
    return prefetch_depth


def check_fully_defined(element_spec, what: str = "dataset") -> None:
    """Raises ValueError unless every shape of the element spec is fully defined."""
    for path, spec in nest.flatten_with_joined_string_paths(element_spec):
        shape = getattr(spec, "shape", None)
        if shape is None or not shape.is_fully_defined():
            where = f" (element component {path!r})" if path else ""
            # Starts with the original's message (ipu_infeed_queue.py).
            raise ValueError(
                f"Output shape {shape} is not fully defined{where}. If using "
                f"tf.Dataset.batch, set `drop_remainder=True`: every element of the {what} "
                "streamed to an IPU must have a static shape."
            )


# The original's words (kernels/datastream/feeds.cc), an InvalidArgumentError.
_EMPTY_DIMENSION = (
    "Detected an input tensor to an infeed queue with a dimension of size 0. Please remove "
    "it from the inputs."
)


_NOT_INITIALIZED = "Make sure that you have run the initializer for this infeed before"
_NOT_INITIALIZED_DETAIL = (
    "Infeed with id='{feed}'. " + _NOT_INITIALIZED + " attempting to delete it."
)


_feed_ids = itertools.count()
# The queues whose stream is set up, by feed id: a queue rebuilt from a type spec inside a
# tf.function reads its original's stream (the original's device keys feeds by id).
_live_queues: weakref.WeakValueDictionary[str, IPUInfeedQueue] = weakref.WeakValueDictionary()


def _has_empty_dimension(element_spec) -> bool:
    return any(0 in tuple(spec.shape) for spec in nest.flatten(element_spec))


def _element_dtypes(element_spec) -> list[tf.DType]:
    return [spec.dtype for spec in nest.flatten(element_spec)]


def _iterator_op(feed: str) -> str:
    return f"IPUCreateDatasetIterator with feed id '{feed}'"


def _unsupported_dtype_message(element_spec, feed: str) -> str | None:
    """Why the feed cannot carry the element (its first component of another type), if so."""
    return stream_dtypes.unsupported_dtype_message(
        _element_dtypes(element_spec), _iterator_op(feed)
    )


class IPUInfeedQueue:
    """Wraps a `tf.data.Dataset` so device loops can stream its elements."""

    def __init__(
        self,
        dataset: tf.data.Dataset,
        device_ordinal: int | None = None,
        prefetch_depth: int | None = None,
        optimise_latency: bool = False,
        **kwargs,
    ) -> None:
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(f"IPUInfeedQueue needs a tf.data.Dataset, got {type(dataset).__name__}")
        check_fully_defined(dataset.element_spec)
        self._device_ordinal = validate_device_ordinal(device_ordinal)
        self._prefetch_depth = _validate_prefetch_depth(prefetch_depth)
        self._optimise_latency = bool(optimise_latency)
        self._element_spec = dataset.element_spec
        self._dataset = dataset
        # As the original's, `_internal_id` names the feed (ipu_infeed_queue.py).
        self._id = str(kwargs.get("_internal_id", next(_feed_ids)))
        self._dequeued = False
        self._initializer_accessed = False
        self._from_spec = False
        self._graph_mode = not tf.executing_eagerly()
        self._stream: ElementStream | ChunkedStream | None = self._new_stream()
        _live_queues[self._id] = self

    # As a value passed to tf.functions (the original's TF2 infeeds are composite tensors).

    @property
    def _structure(self):
        return self._element_spec

    @property
    def _flat_structure(self) -> dict:
        return {
            "output_shapes": data_structure.get_flat_tensor_shapes(self._element_spec),
            "output_types": data_structure.get_flat_tensor_types(self._element_spec),
        }

    @property
    def _type_spec(self) -> IPUInfeedQueueSpec:
        if not self._initializer_accessed:
            # The original's message (ipu_infeed_queue.py).
            raise RuntimeError(
                "Spec for IPUInfeedQueue can only be created for already initialized queues."
            )
        # The spec's fields are the queue's attributes of the same names.
        return IPUInfeedQueueSpec(*(getattr(self, name) for name in IPUInfeedQueueSpec.__slots__))

    @classmethod
    def _from_type_spec(cls, spec: IPUInfeedQueueSpec) -> IPUInfeedQueue:
        """A queue reading the stream of the initialised queue `spec` describes; it neither
        initialises nor deletes that stream."""
        queue = cls.__new__(cls)
        queue._id = spec._id
        queue._element_spec = spec._structure
        queue._device_ordinal = spec._device_ordinal
        queue._prefetch_depth = spec._prefetch_depth
        queue._optimise_latency = spec._optimise_latency
        queue._dataset = None
        queue._dequeued = True
        queue._initializer_accessed = True
        queue._from_spec = True
        source = _live_queues.get(spec._id)
        queue._graph_mode = source._graph_mode if source is not None else not tf.executing_eagerly()
        queue._stream = source._stream if source is not None else None
        return queue

    def _new_stream(self) -> ElementStream | ChunkedStream:
        depth = self._prefetch_depth or _DEFAULT_PREFETCH_DEPTH
        if self._graph_mode:
            return ElementStream(self._dataset, depth)
        return ChunkedStream(self._dataset, depth)

    # Public interface of the original.

    @property
    def element_spec(self):
        return self._element_spec

    @property
    def prefetch_depth(self) -> int | None:
        return self._prefetch_depth

    @property
    def optimise_latency(self) -> bool:
        return self._optimise_latency

    @property
    def device_ordinal(self) -> int:
        return self._device_ordinal

    @property
    def dequeued(self) -> bool:
        """Whether a loop has dequeued from this queue."""
        return self._dequeued

    @property
    def number_of_tuple_elements(self) -> int:
        """How many arguments each element supplies to a loop body."""
        spec = self._element_spec
        if isinstance(spec, (tuple, list, dict)):
            return len(spec)
        return 1

    @property
    def initializer(self):
        """The operation that initialises the queue (TF1 sessions must run it first)."""
        if self._from_spec:
            # The original's message (ipu_infeed_queue.py).
            raise RuntimeError("IPUInfeedQueue created from spec should already be initialized.")
        # Only a graph's initializer is given once; eagerly each access gives a new one
        # (ipu_infeed_queue.py).
        if self._initializer_accessed and not tf.executing_eagerly():
            raise ValueError(
                "The IPUInfeedQueue `initializer` function can only be accessed once: "
                "run the operation it returned once, instead of asking for it again"
            )
        self._initializer_accessed = True
        if tf.executing_eagerly():
            self._check_element_fits_stream()
            return None
        # The original's iterator op fails when its kernel is made, at the first run.
        unsupported = _unsupported_dtype_message(self._element_spec, self._feed_id)
        if unsupported is not None:
            run_errors.install(
                run_errors.assertion_as(
                    tf.errors.FailedPreconditionError, stream_dtypes.UNSUPPORTED_MARKER
                )
            )
            return tf.debugging.Assert(False, [unsupported], name="infeed_initializer")
        if _has_empty_dimension(self._element_spec):
            return tf.debugging.Assert(False, [_EMPTY_DIMENSION], name="infeed_initializer")
        if isinstance(self._stream, ElementStream):  # graph mode
            return self._stream.initializer
        return tf.no_op(name="infeed_initializer")

    def _check_read_in_tf2(self) -> None:
        """A TF2 program reading the queue fails as the original's dequeue op does when its
        program is compiled (a TF1 graph's initializer fails first, at its run)."""
        if not self._graph_mode:
            self._check_element_fits_stream()

    def _check_element_fits_stream(self) -> None:
        """The element types first, then the shapes, as the original's feed kernels check."""
        stream_dtypes.check(_element_dtypes(self._element_spec), _iterator_op(self._feed_id))
        if _has_empty_dimension(self._element_spec):
            raise tf.errors.InvalidArgumentError(None, None, _EMPTY_DIMENSION)

    @property
    def _feed_id(self) -> str:
        return self._id

    def _live_stream(self) -> ElementStream | ChunkedStream:
        if self._stream is None:  # rebuilt from a spec whose queue is gone
            raise tf.errors.FailedPreconditionError(
                None,
                None,
                f"Infeed with id='{self._id}' does not exist: the IPUInfeedQueue this one was "
                "rebuilt from (its type spec) is gone.",
            )
        return self._stream

    @property
    def deleter(self):
        """An operation that releases the queue's iterator so a new queue can take its place."""
        if self._from_spec:
            raise RuntimeError("IPUInfeedQueue created from spec cannot be deleted.")
        if isinstance(self._stream, ChunkedStream):  # eager
            self._stream.release()
        if tf.executing_eagerly():
            return None
        if isinstance(self._stream, ElementStream):
            # The original's error (poplar_executor.cc DeleteInfeedIterator) when no
            # initializer ran before.
            run_errors.install(run_errors.assertion_as(tf.errors.NotFoundError, _NOT_INITIALIZED))
            message = _NOT_INITIALIZED_DETAIL.format(feed=self._feed_id)
            return self._stream.deleter(message)
        return tf.no_op(name="infeed_deleter")

    def get_next(self):
        raise ValueError(
            # The original's message first (ipu_infeed_queue.py).
            "`get_next()` is now obsolete as the IPUInfeedQueue is now automatically "
            "dequeued by the loop: pass the queue to loops.repeat, loops.while_loop or "
            "pipelining_ops.pipeline, which dequeue one element per iteration"
        )

    def _dequeue(self):
        """The next element, read by the program being built (outside any loop).

        Private in the original too, whose tests and some programs call it. It is a
        one-iteration device loop, so that replicas read their own elements in turn
        (replica r the r-th), as from any loop.
        """
        specs = nest.flatten(self._element_spec)
        zeros = [tf.zeros(spec.shape, spec.dtype) for spec in specs]

        def body(*args, **kwargs):
            element = kwargs if kwargs else list(args[len(zeros) :])
            return nest.flatten(element)

        values = device_loop.repeat(1, body, zeros, self)
        return nest.pack_sequence_as(self._element_spec, nest.flatten(values))

    # Used by the engine.

    def _fetch_one(self):
        """Builds a host fetch of the next element."""
        self._dequeued = True
        self._check_read_in_tf2()
        if poplar_flags.infeeds_without_data():
            return synthetic_elements(self._element_spec, None)
        return self._live_stream().fetch_one()

    def _fetch_stacked(self, count: int):
        """Builds a host fetch of the next `count` elements, stacked along a new first axis."""
        self._dequeued = True
        self._check_read_in_tf2()
        if poplar_flags.infeeds_without_data():
            return synthetic_elements(self._element_spec, count)
        stream = self._live_stream()
        if isinstance(stream, ElementStream):  # a TF1 graph's
            run_errors.install(
                run_errors.assertion_as(tf.errors.FailedPreconditionError, REPLICATION_MISMATCH)
            )
            return stream.fetch_stacked(count, self._feed_id)
        return stream.fetch_stacked(count)


class IPUInfeedQueueSpec(type_spec.TypeSpec):
    """The type of an initialised `IPUInfeedQueue` (its feed): a queue rebuilt from it reads
    the same stream, as the original's `_IPUInfeedQueueSpec` (ipu_infeed_queue.py)."""

    __slots__ = (
        "_id",
        "_structure",
        "_flat_structure",
        "_device_ordinal",
        "_prefetch_depth",
        "_optimise_latency",
    )

    def __init__(
        self,
        feed_id: str,
        feed_structure,
        feed_flat_structure: dict,
        feed_device_ordinal: int,
        feed_prefetch_depth: int | None,
        feed_optimise_latency: bool,
    ) -> None:
        self._id = feed_id
        self._structure = feed_structure
        self._flat_structure = feed_flat_structure
        self._device_ordinal = feed_device_ordinal
        self._prefetch_depth = feed_prefetch_depth
        self._optimise_latency = feed_optimise_latency

    @property
    def value_type(self) -> type:
        return IPUInfeedQueue

    def _serialize(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    @property
    def _component_specs(self) -> tuple:
        return ()  # no tensors: the stream is found by the feed id

    def _to_components(self, value) -> tuple:
        return ()

    def _from_components(self, components) -> IPUInfeedQueue:
        return IPUInfeedQueue._from_type_spec(self)  # noqa: SLF001
