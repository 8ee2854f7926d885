"""Gradient accumulation for Keras models: one weight update per N micro-batches.

While a train step is traced, the model's optimizer is stood in for by an
`AccumulatingOptimizer`: `minimize`/`apply_gradients` only add the
micro-batch's gradients into the engine's accumulators
(`engine.gradient_accumulation`). The device loop runs the steps in groups of N
and, after each group, calls `apply_accumulated`, which has the real optimizer
apply the accumulated gradients and restarts the accumulation: the weight update
is a stage of its own after the N micro-batch steps, as on the IPU, so no
conditional surrounds it. Reduction methods follow the spec (see
`GradientAccumulationReductionMethod`).

Standing in for the optimizer (rather than replacing `train_step`) keeps
user-written `train_step`s working, and the loss-scale optimizer of mixed
precision still unscales the accumulated gradients when it applies them. The
optimizer gets them in the accumulators' dtype (`gradient_accumulation_dtype`), as on
the original.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.engine.gradient_accumulation import (
    AccumulatorStore,
    GradientAccumulation,
    GradientAccumulationReductionMethod,
    LastCapturedGradients,
    split_tagged,
    tagged_pairs,
)
from openipu._src.integration import keras_internals


class AccumulatingOptimizer:
    """Stands in for a Keras optimizer: accumulates micro-batches; the loop applies them."""

    def __init__(
        self,
        optimizer,
        count: int,
        reduction: GradientAccumulationReductionMethod,
        store: AccumulatorStore,
        dtype: tf.DType | None = None,
        accumulate_captured: bool = False,
    ) -> None:
        self._optimizer = optimizer
        self._accumulation: GradientAccumulation[object] = GradientAccumulation(
            count, reduction, store, dtype=dtype, owner="gradient_accumulation_dtype"
        )
        self._apply_args: tuple = ((), {})
        # Gradients captured in the step (`captured_grads`): accumulated with the
        # variables' (the pipelining option gradient_accumulation_for_captured_grads),
        # or the last micro-batch's handed over.
        self._accumulate_captured = accumulate_captured
        self._last_captured = LastCapturedGradients(store)
        self._captures = False

    def __getattr__(self, name: str):
        return getattr(self._optimizer, name)

    @property
    def count(self) -> int:
        return self._accumulation.count

    def minimize(self, loss, var_list, tape=None, **kwargs):
        optimizer = self._optimizer
        if hasattr(optimizer, "compute_gradients"):
            grads_and_vars = optimizer.compute_gradients(loss, var_list, tape=tape)
        elif hasattr(optimizer, "_compute_gradients"):  # legacy optimizers
            grads_and_vars = keras_internals.legacy_compute_gradients(
                optimizer, loss, var_list=var_list, tape=tape
            )
        else:
            # A TF1 optimizer given to compile (Keras wraps it in a TFOptimizer): the
            # gradients come from the step's tape, as TFOptimizer.minimize takes them.
            variables = tf.nest.flatten(var_list)
            grads_and_vars = list(zip(tape.gradient(loss, variables), variables, strict=True))
        return self.apply_gradients(grads_and_vars)

    def apply_gradients(self, grads_and_vars, *args, captured_grads=None, **kwargs):
        """Adds one micro-batch's gradients to the accumulators (the update comes later)."""
        pairs: list[tuple[tf.Tensor, object]] = [(g, v) for g, v in grads_and_vars if g is not None]
        self._apply_args = (args, kwargs)
        self._captures = bool(captured_grads)
        kept: list[object] = []
        if captured_grads and self._accumulate_captured:
            pairs += tagged_pairs(captured_grads)
        elif captured_grads:
            kept = self._last_captured.keep(captured_grads)
        added = self._accumulation.add(pairs)
        return tf.group([added, *kept]) if kept else added

    def apply_accumulated(self):
        """The weight update after a group of micro-batches; restarts the accumulation."""
        if not self._accumulation.keys:
            return tf.no_op()
        args, kwargs = self._apply_args
        kept = self._last_captured.read() if self._captures else []

        def apply(accumulated):
            # In the accumulators' dtype, as the original hands them over
            # (gradient_accumulation_optimizer.py: casting back is the optimizer's part).
            variables, captured = split_tagged([*accumulated, *kept])
            if captured:
                # As the original's train step, the captured gradients alone
                # (extensions_base.py `_ipu_train_step`).
                return self._optimizer.apply_gradients(variables, captured_grads=captured)
            return self._optimizer.apply_gradients(variables, *args, **kwargs)

        return self._accumulation.apply_and_restart(apply)
