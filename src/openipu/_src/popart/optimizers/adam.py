"""`popart.Adam`: Adam, AdamW, AdamNoBias, AdaMax, Lamb and LambNoBias.

With g the gradient after accumulation and with loss scaling removed (spec 13.4.3):

    g_tmp = g                 (WeightDecayMode.Decay)
            g + wd * w        (WeightDecayMode.L2Regularization)
    m' = b1 * m + (1 - b1) * g_tmp
    v' = b2 * v + (1 - b2) * g_tmp^2          (Adam, AdamNoBias, Lamb, LambNoBias)
         max(b2 * v, |g_tmp|)                 (AdaMax)
    t' = t + 1
    m_tmp = m' / (1 - b1^t')   (m' in the NoBias modes)
    v_tmp = v' / (1 - b2^t')   (v' in the NoBias modes)
    u = m_tmp / (sqrt(v_tmp) + eps) (+ wd * w with Decay)
    w' = w - lr * u                                   (Adam, AdamNoBias, AdaMax)
    w' = w - min(|w|, mwn) / |u| * lr * u             (Lamb, LambNoBias; the ratio is 1 when
                                                       either norm is 0)

AdaMax follows the original's implementation, not the spec's formula (fact sheet: they
disagree): the spec shows sqrt(v_tmp) with a bias-corrected v, the implementation (and Kingma
and Ba's AdaMax) uses u = m' / (1 - b1^t') / (v' + eps), with v' uncorrected and no square root.

With `scaled_optimizer_state` the state keeps the loss scaling (m is ls times, v ls^2 times,
AdaMax's v ls times what it would be); the update removes it, so the weights do not change.
The state is `Accl1___<w>` (m), `Accl2___<w>` (v) and `Step___<w>` (t, a float32 scalar).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from openipu._src.popart import reserved_names
from openipu._src.popart.builder.tensor_info import DataType
from openipu._src.popart.optimizers.clip_norm import ClipNormSettings, check_clip_norm_settings
from openipu._src.popart.optimizers.enums import AdamMode, WeightDecayMode
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

_NO_BIAS = (AdamMode.AdamNoBias, AdamMode.LambNoBias)
_LAMB = (AdamMode.Lamb, AdamMode.LambNoBias)


class Adam(Optimizer):
    """`Adam(values, mode=AdamMode.Adam, weight_decay_mode=WeightDecayMode.Decay,
    accum_type=DataType.UNDEFINED, accl1_type=DataType.FLOAT, accl2_type=DataType.FLOAT,
    clip_norm_settings=[], scaled_optimizer_state=False, debugContext="adam")`.

    `values` maps `defaultLearningRate` (0.1), `defaultWeightDecay` (0), `defaultBeta1`
    (0.9), `defaultBeta2` (0.999), `defaultEps` (1e-6), `defaultMaxWeightNorm` (10; the
    deprecated `maxWeightNorm` too) and `lossScaling` (1) to `(value, isConst)` tuples.
    """

    NAME = "Adam"
    FAMILY = "Adam"
    HYPER_PARAMETERS = (
        HyperParameter("learningRate", "defaultLearningRate", 0.1),
        HyperParameter("weightDecay", "defaultWeightDecay", 0.0),
        HyperParameter("beta1", "defaultBeta1", 0.9),
        HyperParameter("beta2", "defaultBeta2", 0.999),
        HyperParameter("eps", "defaultEps", 1e-6),
        HyperParameter("maxWeightNorm", "defaultMaxWeightNorm", 10.0),
    )
    KEY_ALIASES = {"maxWeightNorm": "defaultMaxWeightNorm"}

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        mode: AdamMode = AdamMode.Adam,
        weight_decay_mode: WeightDecayMode = WeightDecayMode.Decay,
        accum_type: DataType = DataType.UNDEFINED,
        accl1_type: DataType = DataType.FLOAT,
        accl2_type: DataType = DataType.FLOAT,
        clip_norm_settings: list[ClipNormSettings] | None = None,
        scaled_optimizer_state: bool = False,
        debugContext: Any = "adam",  # noqa: N803
    ) -> None:
        super().__init__(
            values or {},
            check_clip_norm_settings(clip_norm_settings or [], "Adam clip_norm_settings"),
        )
        self._mode = check_enum(mode, AdamMode, "Adam mode")
        self._decay_mode = check_enum(weight_decay_mode, WeightDecayMode, "Adam weight_decay_mode")
        self._accum_type = storage_type(accum_type, "Adam accum_type")
        self._accl1_type = storage_type(accl1_type, "Adam accl1_type")
        self._accl2_type = storage_type(accl2_type, "Adam accl2_type")
        self._scaled_state = check_bool(scaled_optimizer_state, "Adam scaled_optimizer_state")
        self._debug_context = debugContext

    @property
    def scaled_optimizer_state(self) -> bool:
        return self._scaled_state

    @property
    def is_lamb(self) -> bool:
        """Lamb or LambNoBias: the update is scaled by the ratio of weight and update norms."""
        return self._mode in _LAMB

    # -- the original's value maps ----------------------------------------------------------

    def learningRates(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("learningRate")

    def weightDecays(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("weightDecay")

    def beta1s(self) -> OptimizerValueMap:
        return self.value_map("beta1")

    def beta2s(self) -> OptimizerValueMap:
        # The original binds this to the beta1 values by mistake (fact sheet); these are beta2's.
        return self.value_map("beta2")

    def epss(self) -> OptimizerValueMap:
        return self.value_map("eps")

    def maxWeightNorms(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("maxWeightNorm")

    # -- the program -----------------------------------------------------------------------

    def state_slots(self, weight_id: str, accumulating: bool) -> list[StateSlot]:
        return [
            StateSlot(reserved_names.reservedAccl1Prefix(), self._accl1_type),
            StateSlot(reserved_names.reservedAccl2Prefix(), self._accl2_type),
            StateSlot(reserved_names.reservedStepPrefix(), tf.float32, scalar=True),
        ]

    def apply(self, update: WeightUpdate) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        weight, gradient, state = update.weight, update.gradient, update.state
        hyper, loss_scaling = update.hyper, update.loss_scaling
        m_key, v_key = reserved_names.reservedAccl1Prefix(), reserved_names.reservedAccl2Prefix()
        t_key = reserved_names.reservedStepPrefix()
        lr, wd = hyper("learningRate"), hyper("weightDecay")
        b1, b2, eps = hyper("beta1"), hyper("beta2"), hyper("eps")
        # The state is kept in units of the loss-scaled gradient with scaled_optimizer_state.
        state_scale = loss_scaling if self._scaled_state else 1.0
        g_tmp = gradient * (state_scale / loss_scaling)
        if self._decay_mode is WeightDecayMode.L2Regularization:
            g_tmp += wd * weight * state_scale
        m = b1 * state[m_key] + (1 - b1) * g_tmp
        if self._mode is AdamMode.AdaMax:
            v = tf.maximum(b2 * state[v_key], tf.abs(g_tmp))
        else:
            v = b2 * state[v_key] + (1 - b2) * tf.square(g_tmp)
        t = state[t_key] + 1
        m_tmp = m / state_scale
        if self._mode not in _NO_BIAS:
            m_tmp /= 1 - tf.pow(b1, t)
        if self._mode is AdamMode.AdaMax:
            direction = m_tmp / (v / state_scale + eps)
        else:
            v_tmp = v / (state_scale * state_scale)
            if self._mode not in _NO_BIAS:
                v_tmp /= 1 - tf.pow(b2, t)
            direction = m_tmp / (tf.sqrt(v_tmp) + eps)
        if self._decay_mode is WeightDecayMode.Decay:
            direction += wd * weight
        step = lr * direction
        if self._mode in _LAMB:
            weight_norm = tf.minimum(tf.norm(weight), hyper("maxWeightNorm"))
            update_norm = tf.norm(direction)
            usable = tf.logical_and(weight_norm > 0, update_norm > 0)
            ratio = tf.where(usable, weight_norm / tf.where(usable, update_norm, 1.0), 1.0)
            step *= ratio
        return weight - step, {m_key: m, v_key: v, t_key: t}

    def structure(self) -> tuple:
        return (
            self.FAMILY,
            self._mode,
            self._decay_mode,
            self._accum_type,
            self._accl1_type,
            self._accl2_type,
            self._scaled_state,
        )

    def structure_description(self) -> str:
        return (
            f"Adam mode={self._mode.name}, weight_decay_mode={self._decay_mode.name}, "
            f"scaled_optimizer_state={self._scaled_state}"
        )

    def _check_values(self, values: dict[str, OptimizerValue], where: str) -> None:
        check_learning_rate(values, "Adam", where)
        check_non_negative(
            values,
            {
                "weightDecay": "weight decay",
                "beta1": "beta1",
                "beta2": "beta2",
            },  # and no check of maxWeightNorm, as Adam::runValueChecks in adam.cpp
            where,
        )
        check_eps(values, where)
