"""`popart.Adaptive`: AdaGrad, RMSProp, CenteredRMSProp and AdaDelta (and TensorFlow's RMSProp).

The spec's chapter gives no formulas; these are the fact sheet's (from the original's
adaptive.hpp). With g the gradient after accumulation and with loss scaling removed, a its
alpha, m its momentum:

    s  = g                           (WeightDecayMode.Decay)
         g + wd * w                  (WeightDecayMode.L2Regularization)
    v1 = a * v1 + (1 - a) * s^2      (RMSProp, CenteredRMSProp, AdaDelta)
         v1 + s^2                    (AdaGrad)
    v2 = a * v2 + (1 - a) * s        (CenteredRMSProp)
    x  = s / (sqrt(v1) + eps)                    (AdaGrad, RMSProp)
         s / (sqrt(v1 - v2^2) + eps)             (CenteredRMSProp)
         s * sqrt(v2 + eps) / sqrt(v1 + eps)     (AdaDelta, with v2 from before this step;
                                                  then v2 = a * v2 + (1 - a) * x^2)
    v3 = m * v3 + x
    w' = w - lr * (wd * w + v3)      (Decay)
         w - lr * v3                 (L2Regularization)

`rmsprop_tf_variant` (RMSProp and CenteredRMSProp only) follows TensorFlow: v1 starts at one
rather than zero, eps inside the square root (x = s / sqrt(v1 + eps), centered x = s / sqrt(v1 - v2^2 + eps)), and with
momentum the learning rate goes into the momentum: v3 = m * v3 + lr * x and w' = w - (wd * w +
v3) with Decay, w' = w - v3 with L2 (the fact sheet's rule, weight decay not multiplied by lr).
"With momentum" means a momentum that is non-const or not 0: such weights keep v3.

State: `Accl1___<w>` (v1), `Accl2___<w>` (v2, CenteredRMSProp and AdaDelta) and `Accl3___<w>`
(v3, when there is momentum).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.popart import reserved_names
from openipu._src.popart.builder.tensor_info import DataType
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.optimizers.enums import AdaptiveMode, WeightDecayMode
from openipu._src.popart.optimizers.optimizer import (
    Optimizer,
    StateSlot,
    WeightUpdate,
    check_eps,
    check_learning_rate,
    check_non_negative,
    storage_type,
)
from openipu._src.popart.optimizers.values import HyperParameter, OptimizerValue, OptimizerValueMap
from openipu._src.popart.options.typed_fields import check_bool, check_enum

_WITH_V2 = (AdaptiveMode.CenteredRMSProp, AdaptiveMode.AdaDelta)
_TF_VARIANT_MODES = (AdaptiveMode.RMSProp, AdaptiveMode.CenteredRMSProp)


def _ones_like(weight: np.ndarray) -> np.ndarray:
    return np.ones_like(weight)


class Adaptive(Optimizer):
    """`Adaptive(values, mode=AdaptiveMode.RMSProp, weight_decay_mode=WeightDecayMode.Decay,
    accum_type=DataType.UNDEFINED, accl1_type=DataType.FLOAT, accl2_type=DataType.FLOAT,
    accl3_type=DataType.UNDEFINED, rmsprop_tf_variant=False, debugContext="adaptive")`.

    `values` maps `defaultLearningRate` (0.01), `defaultWeightDecay` (0), `defaultAlpha`
    (0.99), `defaultMomentum` (0), `defaultEps` (1e-6) and `lossScaling` (1) to
    `(value, isConst)` tuples.
    """

    NAME = "Adaptive"
    FAMILY = "Adaptive"
    HYPER_PARAMETERS = (
        HyperParameter("learningRate", "defaultLearningRate", 0.01),
        HyperParameter("weightDecay", "defaultWeightDecay", 0.0),
        HyperParameter("alpha", "defaultAlpha", 0.99),
        HyperParameter("momentum", "defaultMomentum", 0.0),
        HyperParameter("eps", "defaultEps", 1e-6),
    )

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        mode: AdaptiveMode = AdaptiveMode.RMSProp,
        weight_decay_mode: WeightDecayMode = WeightDecayMode.Decay,
        accum_type: DataType = DataType.UNDEFINED,
        accl1_type: DataType = DataType.FLOAT,
        accl2_type: DataType = DataType.FLOAT,
        accl3_type: DataType = DataType.UNDEFINED,
        rmsprop_tf_variant: bool = False,
        debugContext: Any = "adaptive",  # noqa: N803
    ) -> None:
        super().__init__(values or {}, [])
        self._mode = check_enum(mode, AdaptiveMode, "Adaptive mode")
        self._decay_mode = check_enum(
            weight_decay_mode, WeightDecayMode, "Adaptive weight_decay_mode"
        )
        self._accum_type = storage_type(accum_type, "Adaptive accum_type")
        self._accl1_type = storage_type(accl1_type, "Adaptive accl1_type")
        self._accl2_type = storage_type(accl2_type, "Adaptive accl2_type")
        self._accl3_type = storage_type(accl3_type, "Adaptive accl3_type")
        self._tf_variant = check_bool(rmsprop_tf_variant, "Adaptive rmsprop_tf_variant")
        if self._tf_variant and self._mode not in _TF_VARIANT_MODES:
            raise popart_exception(
                "The rmspropTFVariant parameter is only valid with the RMSProp and "
                f"CenteredRMSProp optimizers (mode is {self._mode.name})"
            )
        self._debug_context = debugContext

    # -- the original's value maps ----------------------------------------------------------

    def learningRates(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("learningRate")

    def weightDecays(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("weightDecay")

    def alphas(self) -> OptimizerValueMap:
        return self.value_map("alpha")

    def momentums(self) -> OptimizerValueMap:
        return self.value_map("momentum")

    def epss(self) -> OptimizerValueMap:
        return self.value_map("eps")

    # -- the program -----------------------------------------------------------------------

    def _has_momentum(self, weight_id: str) -> bool:
        momentum = self.value("momentum", weight_id)
        return not momentum.isConst() or momentum.val() != 0

    def state_slots(self, weight_id: str, accumulating: bool) -> list[StateSlot]:
        # TensorFlow's RMSProp starts its mean square at one, not zero (the original's
        # willow/src/patterns/adaptivedecompose.cpp does the same for the TF variant).
        starts_at_one = _ones_like if self._tf_variant else None
        slots = [
            StateSlot(reserved_names.reservedAccl1Prefix(), self._accl1_type, initial=starts_at_one)
        ]
        if self._mode in _WITH_V2:
            slots.append(StateSlot(reserved_names.reservedAccl2Prefix(), self._accl2_type))
        if self._has_momentum(weight_id):
            slots.append(StateSlot(reserved_names.reservedAccl3Prefix(), self._accl3_type))
        return slots

    def apply(self, update: WeightUpdate) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        weight, gradient, state = update.weight, update.gradient, update.state
        hyper, loss_scaling = update.hyper, update.loss_scaling
        v1_key = reserved_names.reservedAccl1Prefix()
        v2_key = reserved_names.reservedAccl2Prefix()
        v3_key = reserved_names.reservedAccl3Prefix()
        lr, wd, alpha, eps = (
            hyper("learningRate"),
            hyper("weightDecay"),
            hyper("alpha"),
            hyper("eps"),
        )
        s = gradient / loss_scaling
        if self._decay_mode is WeightDecayMode.L2Regularization:
            s += wd * weight
        new_state: dict[str, tf.Tensor] = {}
        if self._mode is AdaptiveMode.AdaGrad:
            v1 = state[v1_key] + tf.square(s)
        else:
            v1 = alpha * state[v1_key] + (1 - alpha) * tf.square(s)
        new_state[v1_key] = v1
        if self._mode is AdaptiveMode.AdaDelta:
            v2_before = state[v2_key]
            x = s * tf.sqrt(v2_before + eps) / tf.sqrt(v1 + eps)
            new_state[v2_key] = alpha * v2_before + (1 - alpha) * tf.square(x)
        else:
            variance = v1
            if self._mode is AdaptiveMode.CenteredRMSProp:
                v2 = alpha * state[v2_key] + (1 - alpha) * s
                new_state[v2_key] = v2
                variance = v1 - tf.square(v2)
            x = s / tf.sqrt(variance + eps) if self._tf_variant else s / (tf.sqrt(variance) + eps)
        decay = wd * weight if self._decay_mode is WeightDecayMode.Decay else 0.0
        if v3_key not in state:
            return weight - lr * (decay + x), new_state
        momentum = hyper("momentum")
        if self._tf_variant:
            v3 = momentum * state[v3_key] + lr * x
            new_state[v3_key] = v3
            return weight - (decay + v3), new_state
        v3 = momentum * state[v3_key] + x
        new_state[v3_key] = v3
        return weight - lr * (decay + v3), new_state

    def structure(self) -> tuple:
        return (
            self.FAMILY,
            self._mode,
            self._decay_mode,
            self._accum_type,
            self._accl1_type,
            self._accl2_type,
            self._accl3_type,
            self._tf_variant,
        )

    def structure_description(self) -> str:
        return (
            f"Adaptive mode={self._mode.name}, weight_decay_mode={self._decay_mode.name}, "
            f"rmsprop_tf_variant={self._tf_variant}"
        )

    def _check_values(self, values: dict[str, OptimizerValue], where: str) -> None:
        check_learning_rate(values, "Adaptive", where)
        check_non_negative(
            values,
            {"weightDecay": "weight decay", "alpha": "alpha", "momentum": "momentum"},
            where,
        )
        check_eps(values, where)
