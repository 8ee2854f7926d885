"""Checks of the optimizer a model accumulates gradients with (pipelined or not)."""

from __future__ import annotations

import tf_keras


def _optimizer_bases() -> tuple[type, ...]:
    return (tf_keras.optimizers.Optimizer, tf_keras.optimizers.legacy.Optimizer)


def check_minimize_not_overridden(optimizer) -> None:
    """A user's optimizer class must not override `minimize` of the optimizer it extends.

    As keras/ipu/extensions/extensions_base.py `_sanity_check_optimizer`: accumulation
    replaces the weight update, which a `minimize` of the user's own would bypass. Built-in
    optimizers (direct subclasses of the base optimizer) may override it; the loss-scale
    wrapper of mixed precision is looked through.
    """
    inner = getattr(optimizer, "inner_optimizer", None)
    if isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer) and inner is not None:
        check_minimize_not_overridden(inner)
        return
    bases = _optimizer_bases()
    if not isinstance(optimizer, bases):
        return
    mro = type(optimizer).__mro__
    if mro[1] in bases:
        return
    if getattr(mro[0], "minimize", None) == getattr(mro[1], "minimize", None):
        return
    raise ValueError(
        "When using Gradient Accumulation or Pipelining, the provided optimizer must not "
        "override OptimizerV2.minimize."
    )
