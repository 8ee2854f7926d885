"""Gradient accumulation for Keras models: one weight update per N micro-batches.

While a train step is traced, the model's optimizer is stood in for by an
`AccumulatingOptimizer`: `minimize`/`apply_gradients` add the micro-batch's
gradients into accumulators, and every N-th call the real optimizer applies
the accumulated gradients and the accumulators restart. Reduction methods
follow the spec (see `GradientAccumulationReductionMethod`).

Standing in for the optimizer (rather than replacing `train_step`) keeps
user-written `train_step`s working, and the loss-scale optimizer of mixed
precision still unscales the accumulated gradients when it applies them.
"""

from __future__ import annotations

import tensorflow as tf

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
                    0, trainable=False, name="gradient_accumulation_counter"
                )
        return self._counter

    def accumulator(self, variable: tf.Variable, dtype: tf.DType | None) -> tf.Variable:
        key = variable.ref()
        accumulator = self._accumulators.get(key)
        if accumulator is None:
            with tf.init_scope():
                accumulator = tf.Variable(
                    tf.zeros(variable.shape, dtype or variable.dtype),
                    trainable=False,
                    name=variable.name.split(":")[0] + "/gradient_accumulator",
                )
            self._accumulators[key] = accumulator
        return accumulator


class AccumulatingOptimizer:
    """Stands in for a Keras optimizer: accumulates N micro-batches, then applies once."""

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

    def __getattr__(self, name: str):
        return getattr(self._optimizer, name)

    def minimize(self, loss, var_list, tape=None, **kwargs):
        optimizer = self._optimizer
        if hasattr(optimizer, "compute_gradients"):
            grads_and_vars = optimizer.compute_gradients(loss, var_list, tape=tape)
        else:  # legacy optimizers
            grads_and_vars = optimizer._compute_gradients(loss, var_list=var_list, tape=tape)  # noqa: SLF001
        return self.apply_gradients(grads_and_vars)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        counter = self._state.counter()
        index = tf.cast(counter, tf.float32)
        accumulators = []
        updates = []
        for gradient, variable in pairs:
            accumulator = self._state.accumulator(variable, self._dtype)
            gradient = tf.convert_to_tensor(gradient)
            gradient = tf.cast(gradient, accumulator.dtype)
            updates.append(self._accumulate(accumulator, gradient, index))
            accumulators.append(accumulator)
        with tf.control_dependencies(updates):
            cycle_done = counter.assign_add(1) >= self._count

        def apply():
            applied = [
                (tf.cast(a.read_value(), v.dtype), v)
                for a, (_, v) in zip(accumulators, pairs, strict=True)
            ]
            self._optimizer.apply_gradients(applied, *args, **kwargs)
            with tf.control_dependencies([a.read_value() for a in accumulators]):
                resets = [a.assign(tf.zeros_like(a)) for a in accumulators]
            with tf.control_dependencies(resets):
                return tf.identity(counter.assign(0))

        return tf.cond(cycle_done, apply, lambda: tf.identity(counter.read_value()))

    def _accumulate(self, accumulator: tf.Variable, gradient: tf.Tensor, index: tf.Tensor):
        method = GradientAccumulationReductionMethod
        if self._reduction is method.SUM:
            return accumulator.assign_add(gradient)
        if self._reduction is method.MEAN:
            return accumulator.assign_add(gradient / self._count)
        n = tf.cast(index, accumulator.dtype)
        return accumulator.assign(accumulator * n / (n + 1) + gradient / (n + 1))
