"""`IPUOutfeedQueue`: results streamed from device loops back to the host.

Inside a device loop of known length an enqueue writes its values into a
device buffer with one slot per iteration, and the host moves the whole
buffer into its queue once the compiled region has run: no host round trip
per iteration. The length may be a number the host computes just before the
region runs (a fused autograph loop over `tf.range(steps)`): the buffer is
then sized by the host at that point. Anywhere else (a loop of unknown
length, plain functions) an enqueue is a host queue operation.

Dequeued shapes, for an element of shape S, K enqueues since the last
dequeue and R replicas (the spec's table): ALL gives [K, *S] (R = 1) or
[K, R, *S]; LAST gives S (R = 1) or [R, *S].
"""

from __future__ import annotations

import collections
import collections.abc
import enum
import functools
import itertools
import threading
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

from openipu._src.config import poplar_flags
from openipu._src.config.enums import DeviceConnectionType
from openipu._src.engine import (
    autograph_loops,
    deferred_builds,
    device_loop,
    replication,
    stream_dtypes,
)
from openipu._src.engine import region as region_lib
from openipu._src.engine.device_scope import validate_device_ordinal
from openipu._src.engine.engine_variables import engine_variable
from openipu._src.engine.executable import stream_capture
from openipu._src.engine.host_queue import HostQueue
from openipu._src.engine.replicas import lockstep, variable_copies
from openipu._src.engine.value_types import Nested
from openipu._src.integration import run_errors

_names = itertools.count()
_NOT_ENQUEUED = (
    "Trying to dequeue an outfeed which has not been enqueued: build or run a program "
    "that calls `enqueue` on this IPUOutfeedQueue first"
)


class IPUOutfeedMode(enum.Enum):
    """Which enqueued elements a dequeue returns: ALL of them, or only the LAST."""

    ALL = 1
    LAST = 2


def _validate_structure(tensors: Nested) -> Nested:
    """Converts an enqueued value to tensors; what TensorFlow cannot convert fails with its
    own error, as the original's enqueue (ipu_outfeed_queue.py: convert_n_to_tensor)."""
    return nest.map_structure(tf.convert_to_tensor, tensors)


def _storage_graph() -> ops.Graph | None:
    """The graph host resources made now belong to; None when they are eager."""
    with tf.init_scope():
        return None if tf.executing_eagerly() else ops.get_default_graph()


def _superseded(enqueued_in: deferred_builds.BuildAttempt | None) -> bool:
    """Whether an enqueue made in `enqueued_in` belongs to an earlier build of the deferred
    program now built again (the graph keeps the abandoned build's ops)."""
    now = deferred_builds.current_attempt()
    return (
        enqueued_in is not None
        and now is not None
        and enqueued_in.program is now.program
        and enqueued_in.generation < now.generation
    )


class IPUOutfeedQueue:
    """Generates outfeed enqueue operations on the device and dequeue operations on the host."""

    def __init__(
        self,
        outfeed_mode: IPUOutfeedMode | None = None,
        device_ordinal: int | None = None,
        buffer_depth: int = 3,
        optimise_latency: bool = False,
    ) -> None:
        given = outfeed_mode
        # Any falsy mode means ALL, as the original's `outfeed_mode or IPUOutfeedMode.ALL`
        # (ipu_outfeed_queue.py).
        outfeed_mode = outfeed_mode or IPUOutfeedMode.ALL
        if not isinstance(outfeed_mode, IPUOutfeedMode):
            raise ValueError(
                "Expected `outfeed_mode` value to be of `ipu_outfeed_queue.IPUOutfeedMode` "
                f"type, but is {type(given)}: use IPUOutfeedMode.ALL or LAST"
            )
        # Only the original's check (ipu_outfeed_queue.py): any number above 0 is taken, as
        # its op's int attribute takes it; a non-number fails the comparison (TypeError).
        if buffer_depth <= 0:
            raise ValueError(f"Outfeed buffer depth cannot be less than 1, got {buffer_depth}")
        self._mode = outfeed_mode
        self._device_ordinal = validate_device_ordinal(device_ordinal)
        self._buffer_depth = buffer_depth
        self._optimise_latency = bool(optimise_latency)
        self._name = f"outfeed{next(_names)}"
        self._structure: Nested = None  # of tf.TensorSpec, once enqueued
        # Host storage per graph holding it: a TF1 program built in another graph enqueues
        # into storage of its own (the original keys its outfeeds by id, across graphs).
        self._graph_stores: weakref.WeakKeyDictionary[ops.Graph, HostQueue] = (
            weakref.WeakKeyDictionary()
        )
        self._eager_store: HostQueue | None = None
        # Graphs already holding an enqueue, with the replicas that made them.
        self._enqueue_graphs: weakref.WeakKeyDictionary[
            ops.Graph, dict[int, deferred_builds.BuildAttempt | None]
        ] = weakref.WeakKeyDictionary()
        self._enqueuing_thread: int | None = None
        self._enqueuing_graph: ops.Graph | None = None
        # Keeps device buffers alive as long as the queue.
        self._loop_buffers: list[list[tf.Variable]] = []

    @property
    def _store(self) -> HostQueue | None:
        """The host storage of the graph the current program's resources live in."""
        graph = _storage_graph()
        return self._eager_store if graph is None else self._graph_stores.get(graph)

    @_store.setter
    def _store(self, store: HostQueue | None) -> None:
        graph = _storage_graph()
        if graph is None:
            self._eager_store = store
        elif store is None:
            self._graph_stores.pop(graph, None)
        else:
            self._graph_stores[graph] = store

    @property
    def outfeed_mode(self) -> IPUOutfeedMode:
        return self._mode

    @property
    def buffer_depth(self) -> int:
        return self._buffer_depth

    @property
    def device_ordinal(self) -> int:
        return self._device_ordinal

    @property
    def optimise_latency(self) -> bool:
        return self._optimise_latency

    @property
    def enqueued(self) -> bool:
        """Whether `enqueue` was called in the current graph or in a function graph built
        inside it, as the original's (ipu_outfeed_queue.py `enqueued`): a program traced
        anew has not enqueued yet. Asked from another thread than the one that enqueued,
        that thread's graph stands for the current one, as there."""
        if self._structure is None:
            return False
        if self._enqueuing_thread is None:  # enqueued eagerly
            return True
        current = (
            ops.get_default_graph()
            if threading.get_ident() == self._enqueuing_thread
            else self._enqueuing_graph
        )
        for graph in list(self._enqueue_graphs):
            while graph is not None:
                if graph is current:
                    return True
                graph = getattr(graph, "outer_graph", None)
        return False

    # Device side.

    #: Whether elements with a dimension of size 0 may be enqueued: not by programs, whose
    #: enqueue fails as the original's when the program runs; the engine's own outfeeds
    #: (`EngineOutfeedQueue`) carry them.
    _carries_empty_elements = False

    def _refuse_empty_elements(self) -> None:
        """Makes the program being built fail when it runs, where the original's compiler
        refuses the enqueue; outside a compiled program, fails now."""
        region = region_lib.current_region()
        if region is None:
            raise tf.errors.InvalidArgumentError(None, None, _EMPTY_DIMENSION)

        def fail(_region_outputs: list[tf.Tensor | ops.Operation]) -> list[ops.Operation]:
            with ops.device("/device:CPU:0"):
                return [tf.debugging.Assert(False, [_EMPTY_DIMENSION], name=f"{self._name}_empty")]

        region.add_finalizer(fail)

    #: Whether the element types are checked as the original's enqueue kernel does: not
    #: for the engine's own outfeeds, which carry what a front end's program returns.
    _checks_stream_dtypes = True

    def _refuse_unsupported_dtypes(self, message: str) -> None:
        """Fails the program being built when it runs, where the original's compiler makes
        the enqueue kernel and fails (FailedPreconditionError, feeds.cc); outside a
        compiled program, fails now."""
        region = region_lib.current_region()
        if region is None:
            raise tf.errors.FailedPreconditionError(None, None, message)
        run_errors.install(
            run_errors.assertion_as(
                tf.errors.FailedPreconditionError, stream_dtypes.UNSUPPORTED_MARKER
            )
        )

        def fail(_region_outputs: list[tf.Tensor | ops.Operation]) -> list[ops.Operation]:
            with ops.device("/device:CPU:0"):
                return [tf.debugging.Assert(False, [message], name=f"{self._name}_dtype")]

        region.add_finalizer(fail)

    #: Whether elements whose static shape is not fully known may be enqueued: by programs,
    #: as on the original, whose enqueue kernel takes the shapes XLA compiled; not by the
    #: engine's own outfeeds (`EngineOutfeedQueue`), whose host storage needs them.
    _accepts_undefined_shapes = True
    #: The original's error for a dequeue of elements enqueued without a known shape.
    _undefined_shape_error: str | None = None

    def _enqueue_undefined_shape(
        self, tensors: Nested, flat: list[tf.Tensor], shape: tf.TensorShape
    ) -> tf.Operation:
        """The original's enqueue records the static shapes as its op's `output_shapes`; the
        dequeue op reads them back as fully defined shapes, and its kernel fails with
        InvalidArgument (kernels/datastream/feeds.cc `XlaShapesFromAttr`; TensorFlow's
        TensorShape::IsValidShape words the message). The values can never be read: the
        enqueue computes them and keeps none."""
        self._structure = self._structure_of(tensors)
        self._undefined_shape_error = f"Shape {_shape_text(shape)} is not fully defined"
        return tf.group(*flat, name=f"{self._name}_enqueue")

    def enqueue(self, tensors: Nested) -> tf.Operation:
        """Enqueues a tensor, tuple/list or dictionary of tensors; returns the operation to run."""
        tensors = _validate_structure(tensors)
        self._check_prefetch_depth()
        capture = stream_capture.current()
        if capture is not None and capture.collecting_enqueues:
            # A step traced for an executable: what it enqueues is what its call gives back.
            return capture.take_enqueue(self, tensors)
        graph = ops.get_default_graph()
        if not tf.executing_eagerly():
            enqueued_by = self._enqueue_graphs.setdefault(graph, {})
            replica = lockstep.tracing_replica()
            if replica in enqueued_by and not _superseded(enqueued_by[replica]):
                raise ValueError(
                    "An outfeed can only be enqueued once. This IPUOutfeedQueue has already "
                    "been enqueued in this graph (enqueue a tuple or a dictionary to send "
                    "several tensors)"
                )
            enqueued_by[replica] = deferred_builds.current_attempt()
            self._enqueuing_thread = threading.get_ident()
            self._enqueuing_graph = graph
        flat = nest.flatten(tensors)
        specs = [tf.TensorSpec(t.shape, t.dtype) for t in flat]
        undefined = next((s.shape for s in specs if not s.shape.is_fully_defined()), None)
        if undefined is not None and not self._accepts_undefined_shapes:
            raise ValueError(f"IPUOutfeedQueue.enqueue: the shape {undefined} is not fully defined")
        if autograph_loops.probing():
            # A loop body traced only to learn what it reads and writes: no side effects.
            autograph_loops.record_probed_enqueue(self._name, self._structure_of(tensors))
            return tf.no_op(name=f"{self._name}_probed_enqueue")
        if self._checks_stream_dtypes:
            unsupported = stream_dtypes.unsupported_dtype_message(
                [spec.dtype for spec in specs], f"{self._name}_enqueue with feed id '{self._name}'"
            )
            if unsupported is not None:
                self._refuse_unsupported_dtypes(unsupported)
        if not self._carries_empty_elements and any(s.shape.num_elements() == 0 for s in specs):
            self._refuse_empty_elements()
        if undefined is not None:
            return self._enqueue_undefined_shape(tensors, flat, undefined)
        # The dequeue op takes the shapes of the latest enqueue (ipu_outfeed_queue.py keeps
        # the last enqueue's `_flat_shapes`).
        self._undefined_shape_error = None
        self._set_structure(tensors, specs)
        replicas = replication.current_replica_count()
        store = self._ensure_store(specs, replicas)
        iteration = device_loop.flat_iteration()
        region = region_lib.current_region()
        if iteration is not None and region is not None:
            return self._write_loop_buffers(
                flat, specs, iteration, region, store, lockstep.tracing_replica()
            )
        # Each replica enqueues into its own queue (traced once: replica r's copy into r's).
        store.map_replicas()
        return store.enqueue(flat, lockstep.tracing_replica())

    def _check_prefetch_depth(self) -> None:
        """The original's enqueue op takes buffer_depth as its int attribute prefetch_depth
        and its kernel needs 0 < prefetch_depth < 256 (kernels/datastream/feeds.cc)."""
        depth = int(self._buffer_depth)
        if not 0 < depth:
            raise tf.errors.InvalidArgumentError(
                None, None, f"Need 0 < prefetch_depth, got {depth}"
            )
        if not depth < 256:
            raise tf.errors.InvalidArgumentError(
                None, None, f"Need prefetch_depth < 256, got {depth}"
            )

    @staticmethod
    def _structure_of(tensors: Nested) -> Nested:
        return nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), tensors)

    def _set_structure(self, tensors: Nested, specs: list[tf.TensorSpec]) -> None:
        structure = self._structure_of(tensors)
        if self._structure is not None:
            try:
                nest.assert_same_structure(self._structure, structure)
                same = all(
                    a.shape == b.shape and a.dtype == b.dtype
                    for a, b in zip(nest.flatten(self._structure), specs, strict=True)
                )
            except (TypeError, ValueError):
                same = False
            # The original's executor refuses a program whose outfeed of the same feed id
            # has other shapes (poplar_executor.cc, RegisterOutfeeds: FailedPrecondition).
            if not same and self._store is not None:
                raise tf.errors.FailedPreconditionError(
                    None,
                    None,
                    f"Outfeed with id='{self._name}' already exists but with a different "
                    f"tensor shape or replication factor ({self._structure}, now "
                    f"{structure}). Consider changing the `feed_name` in IPUOutfeedQueue.",
                )
        self._structure = structure

    def _ensure_store(self, specs: list[tf.TensorSpec], replicas: int) -> HostQueue:
        if self._store is None or not self._store.matches(specs, replicas):
            self._store = HostQueue(specs, replicas, self._name)
        return self._store

    def _write_loop_buffers(
        self,
        flat: list[tf.Tensor],
        specs: list[tf.TensorSpec],
        iteration: tuple[tf.Tensor, int | tf.Tensor],
        region: region_lib.CompiledRegion,
        store: HostQueue,
        replica: int,
    ) -> tf.Operation:
        index, total = iteration
        made: dict[int, list[tf.Variable]] = {}

        def buffers_of(r: int) -> list[tf.Variable]:
            if r not in made:
                made[r] = self._replica_buffers(specs, total, region, store, r)
            return made[r]

        buffers = buffers_of(replica)
        for position, buffer in enumerate(buffers):
            # Each replica writes buffers of its own: in a program traced once, replica r's
            # copies of these writes write replica r's (made when the copies are).
            variable_copies.set_counterparts(
                buffer, functools.partial(_nth_of, buffers_of, position)
            )
        writes = [
            tf.raw_ops.ResourceScatterUpdate(
                resource=buffer.handle,
                indices=tf.reshape(index, [1]),
                updates=tf.expand_dims(value, 0),
            )
            for buffer, value in zip(buffers, flat, strict=True)
        ]
        return tf.group(writes, name=f"{self._name}_enqueue")

    def _replica_buffers(
        self,
        specs: list[tf.TensorSpec],
        total: int | tf.Tensor,
        region: region_lib.CompiledRegion,
        store: HostQueue,
        replica: int,
    ) -> list[tf.Variable]:
        """Replica `replica`'s device buffers (one slot per iteration), moved to its host queue
        once the region has run."""
        last_only = self._mode is IPUOutfeedMode.LAST
        # One slot at least: XLA compiles the loop body even if it never runs, and a write to
        # an empty buffer would not compile.
        static_total = isinstance(total, int)
        with lockstep.unrecorded(), tf.init_scope(), ops.device(region.device or "/device:CPU:0"):
            buffers = [
                engine_variable(
                    tf.zeros([max(total, 1) if static_total else 1, *spec.shape], spec.dtype),
                    shape=[max(total, 1) if static_total else None, *spec.shape],
                    name=f"{self._name}_buffer",
                )
                for spec in specs
            ]
        for buffer in buffers:
            variable_copies.own_variable(buffer)  # each replica writes a buffer of its own
        if not static_total:
            # The trip count is known once the host has computed it: size the buffers then,
            # before the region runs (automatic control dependencies order the writes after).
            with lockstep.unrecorded(), region.on_host():
                slots = tf.maximum(total, 1)
                for buffer, spec in zip(buffers, specs, strict=True):
                    buffer.assign(tf.zeros([slots, *spec.shape.as_list()], spec.dtype))
        self._loop_buffers.append(buffers)

        def move_to_host(region_outputs: list[tf.Tensor | ops.Operation]) -> list[ops.Operation]:
            with tf.control_dependencies(region_outputs), ops.device("/device:CPU:0"):
                if last_only:
                    # The last slot, if the loop ran at all.
                    last = slice(tf.maximum(total - 1, 0), total)
                    return [store.enqueue_many([b[last] for b in buffers], replica)]
                return [store.enqueue_many([b[:total] for b in buffers], replica)]

        region.add_finalizer(move_to_host)
        return buffers

    # Host side.

    def dequeue(self, wait_for_completion: bool = False) -> Nested:
        """The enqueued values since the last dequeue (all of them, or the last: see the mode)."""
        if self._undefined_shape_error is not None:
            return self._failing_dequeue(self._undefined_shape_error)
        if self._structure is None or self._store is None:
            # Eagerly, a dequeue before the first enqueue (often from a thread polling the
            # queue while training starts) gives [], as in ipu_outfeed_queue.py.
            if tf.executing_eagerly():
                return []
            raise ValueError(_NOT_ENQUEUED)
        if deferred_builds.is_deferred_here():
            # The program enqueuing may be built again for other replicas at the first run.
            built_from: list[HostQueue | None] = []

            def build() -> Nested:
                built_from[:] = [self._store]
                return self._dequeue_from_store()

            return deferred_builds.build_deferred(
                build, lambda: self._store is not built_from[0], shapes_may_change=True
            )
        return self._dequeue_from_store()

    def _failing_dequeue(self, message: str) -> Nested:
        """Eagerly, the error now; in a graph, values of the structure that fail when run."""
        if tf.executing_eagerly():
            raise tf.errors.InvalidArgumentError(None, None, message)
        run_errors.install(run_errors.assertion_as(tf.errors.InvalidArgumentError, message))
        with ops.device("/device:CPU:0"):
            check = tf.debugging.Assert(False, [message], name=f"{self._name}_dequeue")
            with tf.control_dependencies([check]):
                flat = [self._never_read(spec) for spec in nest.flatten(self._structure)]
        return nest.pack_sequence_as(self._structure, flat)

    def _never_read(self, spec: tf.TensorSpec) -> tf.Tensor:
        """A stand-in for values that cannot be dequeued, with the dequeue op's static shape
        (an unknown count of elements, ahead of each in ALL mode)."""
        shape = spec.shape
        if self._mode is not IPUOutfeedMode.LAST:
            shape = tf.TensorShape([None]).concatenate(shape)
        dims = [0] if shape.rank is None else [0 if d is None else d for d in shape.as_list()]
        zeros = tf.zeros(dims, spec.dtype)
        return tf.compat.v1.placeholder_with_default(zeros, shape)

    def _dequeue_from_store(self) -> Nested:
        store = self._store
        if store is None:  # released (`deleter`) before a deferred dequeue was built again
            raise ValueError(_NOT_ENQUEUED)
        replicas = store.replicas
        specs = store.specs
        if poplar_flags.is_synthetic("outfeed"):
            lead = [0] if replicas == 1 else [0, replicas]
            empty = [tf.zeros(lead + list(s.shape), s.dtype) for s in specs]
            if self._mode is IPUOutfeedMode.LAST:
                # The original's dequeue kernel fails when it runs (kernels/datastream/feeds.cc).
                empty = [self._last(values, _LAST_WITH_SYNTHETIC_DATA) for values in empty]
            return nest.pack_sequence_as(self._structure, empty)

        with ops.device("/device:CPU:0"):
            per_replica = [store.dequeue_all(r) for r in range(replicas)]
            if replicas == 1:
                flat = per_replica[0]
            else:
                flat = [tf.stack(parts, axis=1) for parts in zip(*per_replica, strict=True)]
            if self._mode is IPUOutfeedMode.LAST:
                flat = [self._last(values) for values in flat]
        return nest.pack_sequence_as(self._structure, flat)

    def _last(self, values: tf.Tensor, empty_message: str = "") -> tf.Tensor:
        empty_message = empty_message or _LAST_BEFORE_ENQUEUE
        count = tf.shape(values)[0]
        if region_lib.device_connection_type() is DeviceConnectionType.PRE_COMPILE:
            # Pre-compiled programs never run and "any numerical results returned are set
            # to zero" (the original's compiling.rst): the last value is zeros.
            zeros = tf.zeros(tf.shape(values)[1:], values.dtype)
            if tf.executing_eagerly():
                return values[-1] if int(count) else zeros
            return tf.cond(count > 0, lambda: values[-1], lambda: zeros)
        if tf.executing_eagerly():
            if int(count) == 0:
                raise tf.errors.FailedPreconditionError(None, None, empty_message)
            return values[-1]
        run_errors.install(
            run_errors.assertion_as(tf.errors.FailedPreconditionError, empty_message)
        )
        check = tf.debugging.assert_positive(count, message=empty_message)
        with tf.control_dependencies([check]):
            return values[-1]

    @property
    def deleter(self) -> tf.Operation | None:
        """An operation releasing the host storage, after which the queue can be reused."""
        store, self._store = self._store, None
        self._structure = None
        self._undefined_shape_error = None
        self._enqueue_graphs = weakref.WeakKeyDictionary()
        self._enqueuing_thread = self._enqueuing_graph = None
        if store is None:
            return None if tf.executing_eagerly() else tf.no_op()
        ops_ = store.close()
        return None if tf.executing_eagerly() else tf.group(ops_)

    def __iter__(self) -> IPUOutfeedQueueIterator:
        """An iterator over the enqueued elements (each enqueue, with replicas inside); it
        dequeues whenever it has yielded all it holds, so it can follow a running program."""
        if not tf.executing_eagerly():
            raise RuntimeError("IPUOutfeedQueue can only be iterated over in eager mode.")
        if self._mode is not IPUOutfeedMode.ALL:
            raise RuntimeError(
                "IPUOutfeedQueue can only be iterated over if the `outfeed_mode` is set to "
                "'IPUOutfeedMode.ALL'."
            )
        return IPUOutfeedQueueIterator(self)


# The original's words (kernels/datastream/feeds.cc, outfeed enqueue), an InvalidArgumentError.
_EMPTY_DIMENSION = (
    "Detected an input tensor to an outfeed queue with a dimension of size 0. Please remove "
    "it from the inputs."
)

# The original's words and error type (kernels/datastream/feeds.cc, outfeed dequeue).
_LAST_WITH_SYNTHETIC_DATA = (
    "Trying to get the last value from an outfeed queue when using synthethic data. This is "
    "not supported."
)
_LAST_BEFORE_ENQUEUE = (
    "Trying to get the last value from an outfeed queue before it was executed. Make sure "
    "the outfeed dequeue TensorFlow operation is executed after the enqueue to the outfeed "
    "has completed."
)


def _shape_text(shape: tf.TensorShape) -> str:
    """TensorFlow's DebugString of a shape proto: [?,4], or <unknown>."""
    if shape.rank is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape.as_list()) + "]"


def _nth_of(
    buffers_of: collections.abc.Callable[[int], list[tf.Variable]], position: int, replica: int
) -> tf.Variable:
    return buffers_of(replica)[position]


class EngineOutfeedQueue(IPUOutfeedQueue):
    """An outfeed the engine's own programs return their outputs through: it also carries
    elements with a dimension of size 0 (a PopART model's outputs may have one)."""

    _carries_empty_elements = True
    _checks_stream_dtypes = False
    _accepts_undefined_shapes = False


class ScopedIPUOutfeedQueue(IPUOutfeedQueue):
    """An IPUOutfeedQueue whose host storage is released when the queue is deleted.

    As the original's (ipu_outfeed_queue.py), it can only be created eagerly.
    """

    def __init__(
        self, outfeed_mode: IPUOutfeedMode | None = None, device_ordinal: int | None = None
    ) -> None:
        if not tf.executing_eagerly():
            raise RuntimeError("ScopedIPUOutfeedQueue can only be created in eager mode")
        super().__init__(outfeed_mode=outfeed_mode, device_ordinal=device_ordinal)

    def __del__(self) -> None:
        store = getattr(self, "_eager_store", None)  # made eagerly, as the queue
        if store is None:
            return
        self._eager_store = None
        try:
            # The collector may run this while another program is being traced: the release
            # must run eagerly, outside that program's graph.
            with ops.init_scope():
                if tf.executing_eagerly():
                    store.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown: nothing to release
            pass


class IPUOutfeedQueueIterator(collections.abc.Iterator[Nested]):
    """Yields the elements of an IPUOutfeedQueue one enqueue at a time (ipu_outfeed_queue.py).

    When it has yielded every element it dequeued, the next `next()` dequeues again; it
    stops when a dequeue gives nothing.
    """

    def __init__(self, outfeed_queue: IPUOutfeedQueue) -> None:
        self._outfeed_queue = outfeed_queue
        self._pending: collections.deque[Nested] = collections.deque()

    def __iter__(self) -> IPUOutfeedQueueIterator:
        return self

    def __next__(self) -> Nested:
        if not self._pending:
            with context.eager_mode():
                values = self._outfeed_queue.dequeue()
            flat = [np.asarray(v) for v in nest.flatten(values)]
            count = flat[0].shape[0] if flat else 0
            for k in range(count):
                self._pending.append(
                    nest.pack_sequence_as(values, [tf.constant(v[k]) for v in flat])
                )
        if not self._pending:
            raise StopIteration
        return self._pending.popleft()
