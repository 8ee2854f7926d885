"""`tf_keras` `loss_scale_optimizer.strategy_supports_loss_scaling`, widened.

Why: the original's Keras accepts a `LossScaleOptimizer` (and the `mixed_float16`
policy) in an IPUStrategy scope: its strategy says `supports_loss_scaling`. Stock
Keras accepts only the strategies it lists and raises "Loss scaling is not supported
with the tf.distribute.Strategy: IPUStrategyV1". Checked with tf_keras 2.21 (the
optimizer's constructor, `base_layer_v1` and `policy.py` call this module function).
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from openipu._src.integration.patching import Kind, Patch, apply, register


def _widened(stock: Callable[[], bool]) -> Callable[[], bool]:
    def strategy_supports_loss_scaling() -> bool:
        if tf.distribute.has_strategy() and getattr(
            tf.distribute.get_strategy(), "supports_loss_scaling", False
        ):
            return True
        return stock()

    strategy_supports_loss_scaling.__doc__ = stock.__doc__
    return strategy_supports_loss_scaling


STRATEGY_SUPPORTS_LOSS_SCALING = register(
    Patch(
        module="tf_keras.src.mixed_precision.loss_scale_optimizer",
        attribute="strategy_supports_loss_scaling",
        kind=Kind.FUNCTION,
        replacement=_widened,
        reason="strategies that say `supports_loss_scaling` (IPUStrategy) accept loss scaling",
        tf_keras=("2.21",),
    )
)


def install() -> None:
    """Applies the patch (idempotent)."""
    apply(STRATEGY_SUPPORTS_LOSS_SCALING)
