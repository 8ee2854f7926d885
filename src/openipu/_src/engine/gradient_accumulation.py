"""Gradient accumulation, once for every front end: one weight update per N micro-batches.

On the IPU the gradients of a group of micro-batches are added into device buffers and
the weights are updated once, from those buffers, after the group. Every front end that
trains (Keras, the optimizer wrappers, pipelines, PopART sessions) describes that with a
`GradientAccumulation` and the engine does the rest:

- how micro-batch gradients combine (`GradientAccumulationReductionMethod`);
- the accumulators: engine state (`engine_variables`), never initialized, saved or
  trained by the user's program, one per trained variable and type, on the variable's
  device, kept across traces of the program, and each replica's own (no replica copies
  are kept in step with them);
- the micro-batch counter, which numbers the micro-batches of a group (a running mean
  needs it, and an update inside the step tests it);
- the update: the accumulated gradients are read once, handed to the front end's optimizer,
  and then the accumulators and the counter restart.

Where the update runs is the program's shape: after each group of steps
(`device_loop.repeat_in_groups`, which `LoopProgram` and pipelines build), or, for the
TF1-style optimizer wrappers that cannot see the loop, inside the step under a
conditional on the counter (`complete_after`).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeAlias, TypeVar

import tensorflow as tf
from tensorflow.python.framework import ops

from openipu._src.engine.engine_variables import engine_variable
from openipu._src.engine.replicas import lockstep, variable_copies

Key = TypeVar("Key", bound=Hashable)

#: An accumulator type: None (the variable's), a DType, or a callable from the variable.
AccumulatorDType: TypeAlias = "tf.DType | Callable[[tf.Variable], tf.DType] | None"


class GradientAccumulationReductionMethod(enum.Enum):
    """How the gradients of N micro-batches are combined before the weight update.

    SUM adds them; MEAN adds each divided by N; RUNNING_MEAN keeps a running
    mean, acc_{n+1} = acc_n * n / (n + 1) + g_n / (n + 1) (n counts from 0),
    which ends at the mean by a different rounding path.
    """

    SUM = 0
    MEAN = 1
    RUNNING_MEAN = 2

    @classmethod
    def parse(
        cls, value: object, parameter: str = "reduction_method"
    ) -> GradientAccumulationReductionMethod:
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        # Starts with the original's message (gradient_accumulation.py).
        raise ValueError(
            f"Cannot parse {value} as one of GradientAccumulationReductionMethod. "
            f"{parameter} must be one of 'sum', 'mean', 'running_mean' (or a "
            f"GradientAccumulationReductionMethod), got {value!r}"
        )

    def accumulate(
        self, accumulator: tf.Variable, gradient: object, count: int | tf.Tensor, index: object
    ) -> object:
        """Adds micro-batch `index` (0-based) of `count` into `accumulator`; returns the update."""
        value = tf.cast(tf.convert_to_tensor(gradient), accumulator.dtype)
        if self is GradientAccumulationReductionMethod.SUM:
            return accumulator.assign_add(value)
        if self is GradientAccumulationReductionMethod.MEAN:
            # The count may be a tensor given at run time (a pipeline's).
            return accumulator.assign_add(value / tf.cast(count, accumulator.dtype))
        n = tf.cast(index, accumulator.dtype)
        return accumulator.assign(accumulator * n / (n + 1) + value / (n + 1))


@dataclasses.dataclass(frozen=True)
class TensorKey:
    """A gradient accumulated without a variable: one of the gradients captured under
    `tag` (`capture_upstream_gradients`). Its accumulator is made from the gradient's
    shape and type, as the original's accumulate_tagged_gradients (ops/op_util.py)."""

    tag: str
    index: int
    tensor: tf.Tensor = dataclasses.field(compare=False, hash=False, repr=False)

    @property
    def dtype(self) -> tf.DType:
        return self.tensor.dtype

    def store_key(self, dtype: tf.DType) -> Hashable:
        return ("tagged", self.tag, self.index, tuple(self.tensor.shape), dtype)


CapturedGradients: TypeAlias = "dict[str, list[tf.Tensor]]"


def tagged_pairs(captured: CapturedGradients) -> list[tuple[tf.Tensor, TensorKey]]:
    """(gradient, key) pairs of captured gradients, to accumulate beside the variables'."""
    return [
        (gradient, TensorKey(tag, index, gradient))
        for tag, gradients in captured.items()
        for index, gradient in enumerate(gradients)
    ]


def split_tagged(
    values: Sequence[tuple[tf.Tensor, object]],
) -> tuple[list[tuple[tf.Tensor, object]], CapturedGradients]:
    """Accumulated (value, key) pairs: the variables' pairs, and {tag: [gradients]}."""
    variables: list[tuple[tf.Tensor, object]] = []
    captured: CapturedGradients = {}
    for value, key in values:
        if isinstance(key, TensorKey):
            captured.setdefault(key.tag, []).append(value)
        else:
            variables.append((value, key))
    return variables, captured


class LastCapturedGradients:
    """Captured gradients that are not accumulated (`gradient_accumulation_for_captured_grads`
    False): the last micro-batch's, kept in buffers for the weight update."""

    def __init__(self, store: AccumulatorStore) -> None:
        self._store = store
        self._keys: list[TensorKey] = []

    def _buffer(self, key: TensorKey) -> tf.Variable:
        # The current replica's (the store keys buffers by the tracing replica).
        return self._store.buffer(
            ("last", key.store_key(key.dtype)),
            key.tensor.shape,
            key.dtype,
            f"{key.tag}_{key.index}_captured_gradient",
        )

    def keep(self, captured: CapturedGradients) -> list[object]:
        """Stores a micro-batch's captured gradients; returns the assignments."""
        pairs = tagged_pairs(captured)
        self._keys = [key for _, key in pairs]
        return [self._buffer(key).assign(gradient, read_value=False) for gradient, key in pairs]

    def read(self) -> list[tuple[tf.Tensor, TensorKey]]:
        """The kept gradients as (value, key) pairs (see `split_tagged`)."""
        return [(self._buffer(key).read_value(), key) for key in self._keys]


def floating_accumulator_dtype(dtype: tf.DType, owner: str) -> tf.DType:
    """`dtype`, checked to be a type accumulators may have (a floating one)."""
    if not dtype.is_floating:
        raise TypeError(f"{owner}: accumulators must have a floating dtype, got {dtype.name}")
    return dtype


class AccumulatorStore:
    """The accumulators and micro-batch counters one owner (a model, an optimizer) keeps.

    Accumulators are keyed by the variable, their type, the replica and (in TF1) the
    graph, so a program traced again, or run on more replicas, finds its own.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._accumulators: dict[tuple[object, ...], tf.Variable] = {}
        self._counters: dict[tuple[object, ...], tf.Variable] = {}

    def accumulators(self) -> list[tf.Variable]:
        """Every accumulator made so far (of every replica and graph)."""
        return list(self._accumulators.values())

    def accumulator(self, variable: tf.Variable, dtype: tf.DType) -> tf.Variable:
        # Beside the variable, where the program using it runs (a tf.distribute replica's
        # on its own device, beside its copy of the variable).
        name = variable.name.split(":")[0]
        return self.buffer(
            (variable.ref(), dtype),
            variable.shape,
            dtype,
            f"{name}_gradient_accumulator",
            variable.device,
        )

    def buffer(
        self,
        key: Hashable,
        shape: object,
        dtype: tf.DType,
        name: str,
        device: str | None = None,
    ) -> tf.Variable:
        """A zero-initialized accumulator for `key` (what it accumulates is the owner's)."""

        def of_replica(replica: int) -> tf.Variable:
            full_key = (key, *_context_key(replica))
            found = self._accumulators.get(full_key)
            if found is None:
                found = _own_zeros(shape, dtype, name, device)
                self._accumulators[full_key] = found
                # A program traced once maps replica 0's accumulator to replica r's.
                variable_copies.set_counterparts(found, of_replica)
            return found

        return of_replica(lockstep.tracing_replica())

    def counter(self, device: str | None) -> tf.Variable:
        """The micro-batch counter of the current replica (and graph)."""

        def of_replica(replica: int) -> tf.Variable:
            key = _context_key(replica)
            found = self._counters.get(key)
            if found is None:
                found = _own_zeros([], tf.int32, self._name, device)
                self._counters[key] = found
                variable_copies.set_counterparts(found, of_replica)
            return found

        return of_replica(lockstep.tracing_replica())


def _own_zeros(shape: object, dtype: tf.DType, name: str, device: str | None) -> tf.Variable:
    """An engine variable of zeros outside any program, the current replica's own."""
    with variable_copies.outside_programs(), ops.device(device or None):
        made = engine_variable(tf.zeros(shape, dtype), name=name.replace("/", "_"))
    # Each replica keys its own: no copies of it are kept for other replicas.
    return variable_copies.own_variable(made)


class GradientAccumulation(Generic[Key]):
    """Accumulates the gradients of `count` micro-batches; applies them once.

    `add(pairs)` adds one micro-batch's (gradient, key) pairs; `apply_and_restart(apply)`
    hands the accumulated (value, key) pairs to `apply` (the front end's weight update)
    and then restarts the accumulation. A key is the trained `tf.Variable`, whose
    accumulator the store keeps (of type `dtype`), unless `accumulator_for` maps keys to
    accumulators the front end keeps itself (PopART's named `Accum___` tensors).
    """

    def __init__(
        self,
        count: int,
        reduction: GradientAccumulationReductionMethod,
        store: AccumulatorStore,
        *,
        dtype: AccumulatorDType = None,
        accumulator_for: Callable[[Key], tf.Variable] | None = None,
        counter_device: str | None = None,
        owner: str = "Gradient accumulation",
    ) -> None:
        self.count = count
        self._owner = owner
        self.reduction = reduction
        self._store = store
        self._dtype = dtype
        self._accumulator_for = accumulator_for
        self._counter_device = counter_device
        self._keys: list[Key] = []

    @property
    def keys(self) -> list[Key]:
        """The keys the last `add` accumulated (what the update will apply)."""
        return list(self._keys)

    def counter(self) -> tf.Variable:
        """How many micro-batches of the current group were added (this replica's)."""
        return self._store.counter(self._counter_device)

    @staticmethod
    def _device_of(keys: Sequence[Key]) -> str | None:
        """Where the program trains (its variables' device): the counter goes there too."""
        for key in keys:
            if isinstance(key, tf.Variable):
                return str(key.device)
        return None

    def accumulator(self, key: Key) -> tf.Variable:
        if self._accumulator_for is not None:
            return self._accumulator_for(key)
        if isinstance(key, TensorKey):
            dtype = self.accumulator_dtype(key)
            return self._store.buffer(
                key.store_key(dtype),
                key.tensor.shape,
                dtype,
                f"{key.tag}_{key.index}_captured_gradient_accumulator",
            )
        if not isinstance(key, tf.Variable):
            raise TypeError(f"Gradients are accumulated per tf.Variable, got {key!r}")
        return self._store.accumulator(key, self.accumulator_dtype(key))

    def accumulator_dtype(self, variable: tf.Variable | TensorKey) -> tf.DType:
        rule = self._dtype
        if rule is None:
            return variable.dtype.base_dtype
        try:  # a dtype (a NumPy type is callable too), as op_util.get_accumulator_dtype
            return tf.as_dtype(rule)
        except TypeError:
            if not callable(rule):
                raise
        # A callable is given the variable, or the captured gradient (op_util.py).
        returned = rule(variable.tensor if isinstance(variable, TensorKey) else variable)
        try:
            dtype = tf.as_dtype(returned)
        except TypeError:
            raise TypeError(
                f"{self._owner}: the dtype callable must return a DType, got {returned!r} for "
                f"{variable.tag if isinstance(variable, TensorKey) else variable.name}"
            ) from None
        return floating_accumulator_dtype(dtype, self._owner)

    def add(self, pairs: Sequence[tuple[object, Key]], index: tf.Tensor | None = None) -> object:
        """Adds micro-batch `index` of the group (by default, the counter's) to the accumulators.

        The counter counts the micro-batch in either case.
        """
        self._keys = [key for _, key in pairs]
        counter = self._store.counter(self._counter_device or self._device_of(self._keys))
        position = counter.read_value()
        if index is None:
            index = position
        updates = [
            self.reduction.accumulate(self.accumulator(key), gradient, self.count, index)
            for gradient, key in pairs
        ]
        with tf.control_dependencies([_as_dependency(update) for update in updates]):
            return counter.assign(position + 1, read_value=False)

    def complete_after(self, added: object) -> tf.Tensor:
        """After `added` (an `add`): whether the group is complete (the update is due)."""
        with tf.control_dependencies([added]):
            return tf.greater_equal(self.counter().read_value(), self.count)

    def apply_and_restart(
        self, apply: Callable[[list[tuple[tf.Tensor, Key]]], object]
    ) -> tf.Operation:
        """`apply(accumulated pairs)`, then zero accumulators and counter; returns the op."""
        accumulators = [(self.accumulator(key), key) for key in self._keys]
        values = [(accumulator.read_value(), key) for accumulator, key in accumulators]
        applied = apply(values)
        dependencies = [value for value, _ in values]
        # The update may be an op, a tensor, a variable (Keras' iterations), a list of them
        # or None.
        for part in tf.nest.flatten(applied):
            if isinstance(part, (tf.Tensor, tf.Operation, tf.Variable)):
                dependencies.append(_as_dependency(part))
        with tf.control_dependencies(dependencies):
            restarts = [a.assign(tf.zeros_like(a)) for a, _ in accumulators]
            restarts.append(self.counter().assign(0))
        return tf.group(restarts)


def _context_key(replica: int) -> tuple[object, ...]:
    """What makes accumulators distinct besides the variable: the replica, the TF1 graph.

    The replica is the compiled program's replica, and the tf.distribute replica when a
    strategy with several local replicas (one per device) runs the code.
    """
    with tf.init_scope():
        # TF1 graphs each need their own variables; eager ones are shared.
        graph = None if tf.executing_eagerly() else id(ops.get_default_graph())
    return (replica, _distribute_replica(), graph)


def _distribute_replica() -> int | None:
    """The tf.distribute replica running the code, if its strategy has several here."""
    if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
        return None
    context = tf.distribute.get_replica_context()
    if context.num_replicas_in_sync == 1:
        return None
    static = tf.get_static_value(context.replica_id_in_sync_group)
    return None if static is None else int(static)


def _as_dependency(value: object) -> object:
    return value.op if isinstance(value, tf.Variable) else value
