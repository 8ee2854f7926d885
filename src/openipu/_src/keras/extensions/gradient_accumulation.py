"""Gradient accumulation for Keras models: one weight update per N micro-batches.

While a train step is traced, the model's optimizer is stood in for by an
`AccumulatingOptimizer`: `minimize`/`apply_gradients` only add the
micro-batch's gradients into accumulators. The device loop runs the steps in
groups of N and, after each group, calls `apply_accumulated`, which has the
real optimizer apply the accumulated gradients and restarts the
accumulators: the weight update is a stage of its own after the N micro-batch
steps, as on the IPU, so no conditional surrounds it (tf.distribute cannot
synchronise replicas inside one). Reduction methods follow the spec (see
`GradientAccumulationReductionMethod`).

Standing in for the optimizer (rather than replacing `train_step`) keeps
user-written `train_step`s working, and the loss-scale optimizer of mixed
precision still unscales the accumulated gradients when it applies them.
Accumulators are per replica (sync-on-read variables): replicas accumulate
their own micro-batches, and the optimizer's update all-reduces them.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.integration import keras_internals
from openipu._src.optimizers.reduction_method import GradientAccumulationReductionMethod


class AccumulatorState:
    """The accumulators and micro-batch counter of one model, kept across programs."""

    def __init__(self) -> None:
        self._accumulators: dict = {}
        self._counter: tf.Variable | None = None

    def counter(self) -> tf.Variable:
        if self._counter is None:
            with tf.init_scope():
                self._counter = tf.Variable(
                    0,
                    trainable=False,
                    name="gradient_accumulation_counter",
                    synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
                )
        return self._counter

    def accumulator(self, variable: tf.Variable, dtype: tf.DType | None) -> tf.Variable:
        key = (variable.ref(), dtype)
        accumulator = self._accumulators.get(key)
        if accumulator is None:
            with tf.init_scope():
                accumulator = tf.Variable(
                    tf.zeros(variable.shape, dtype or variable.dtype),
                    trainable=False,
                    name=variable.name.split(":")[0] + "/gradient_accumulator",
                    synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.SUM,
                )
            self._accumulators[key] = accumulator
        return accumulator


class AccumulatingOptimizer:
    """Stands in for a Keras optimizer: accumulates micro-batches; the loop applies them."""

    def __init__(
        self,
        optimizer,
        count: int,
        reduction: GradientAccumulationReductionMethod,
        state: AccumulatorState,
        dtype: tf.DType | None = None,
    ) -> None:
        self._optimizer = optimizer
        self._count = count
        self._reduction = reduction
        self._state = state
        self._dtype = dtype
        self._pairs: list[tuple[tf.Variable, tf.Variable]] = []
        self._apply_args: tuple = ((), {})

    def __getattr__(self, name: str):
        return getattr(self._optimizer, name)

    @property
    def count(self) -> int:
        return self._count

    def minimize(self, loss, var_list, tape=None, **kwargs):
        optimizer = self._optimizer
        if hasattr(optimizer, "compute_gradients"):
            grads_and_vars = optimizer.compute_gradients(loss, var_list, tape=tape)
        else:  # legacy optimizers
            grads_and_vars = keras_internals.legacy_compute_gradients(
                optimizer, loss, var_list=var_list, tape=tape
            )
        return self.apply_gradients(grads_and_vars)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        """Adds one micro-batch's gradients to the accumulators (the update comes later)."""
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        counter = self._state.counter()
        index = counter.read_value()
        updates = []
        self._pairs = []
        for gradient, variable in pairs:
            accumulator = self._state.accumulator(variable, self._dtype)
            gradient = tf.cast(tf.convert_to_tensor(gradient), accumulator.dtype)
            updates.append(self._accumulate(accumulator, gradient, index))
            self._pairs.append((accumulator, variable))
        self._apply_args = (args, kwargs)
        with tf.control_dependencies(updates):
            return counter.assign_add(1)

    def apply_accumulated(self):
        """The weight update after a group of micro-batches; restarts the accumulation."""
        if not self._pairs:
            return tf.no_op()
        args, kwargs = self._apply_args
        applied = [(tf.cast(a.read_value(), v.dtype), v) for a, v in self._pairs]
        update = self._optimizer.apply_gradients(applied, *args, **kwargs)
        dependencies = (
            [update] if isinstance(update, (tf.Tensor, tf.Operation, tf.Variable)) else []
        )
        with tf.control_dependencies(dependencies + [value for value, _ in applied]):
            resets = [a.assign(tf.zeros_like(a)) for a, _ in self._pairs]
            resets.append(self._state.counter().assign(0))
        return tf.group(resets)

    def _accumulate(self, accumulator: tf.Variable, gradient: tf.Tensor, index: tf.Tensor):
        return self._reduction.accumulate(accumulator, gradient, self._count, index)
