"""`popart.SGD` and `popart.ConstSGD`: stochastic gradient descent with momentum, dampening,
velocity scaling, weight decay, loss scaling, Nesterov momentum and clip norms.

With g the gradient after accumulation and with loss scaling removed, the documented update
(spec 13.4.1) is, for a weight w with velocity v:

    v' = v * mm + (1 - dm) * (g + wd * w)
    w' = w - lr * (g + wd * w + mm * v')    (nesterov)
    w' = w - lr * v'                         (otherwise)

The velocity is stored multiplied by the velocity scaling vs (v = v * mm + vs * (1 - dm) *
(g + wd * w), and w' = w - lr / vs * v'), which changes the stored state but not the weights.

A weight whose momentum is a const 0 without gradient accumulation keeps no velocity (the
original's "SGD0": w' = w - lr * (1 - dm) * (g + wd * w)); the others keep `Accl___<w>`
(Combined) or `Accl1___<w>` (Separate).

Deviation from the original, deliberately: its Combined mode (one tensor for the accumulator
and the velocity) precomputes the momentum and weight-decay terms at the end of each step, so
a change of momentum, dampening or weight decay by updateOptimizerFromHost takes effect one
step late there (fact sheet). Here both modes follow the spec's formula, in which every value
applies from the next update on. Both modes keep the gradient accumulator as `Accum___<w>`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from openipu._src.popart import reserved_names
from openipu._src.popart.builder.tensor_info import DataType
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.optimizers.clip_norm import ClipNormSettings, check_clip_norm_settings
from openipu._src.popart.optimizers.enums import SGDAccumulatorAndMomentum
from openipu._src.popart.optimizers.optimizer import (
    Optimizer,
    StateSlot,
    WeightUpdate,
    check_learning_rate,
    check_non_negative,
    storage_type,
)
from openipu._src.popart.optimizers.values import HyperParameter, OptimizerValue, OptimizerValueMap
from openipu._src.popart.options.typed_fields import check_enum
from openipu._src.popart.pybind_arguments import FLOAT, Arg, InstanceOf, ListOf, binding

_NESTEROV = "nesterov"
_CLIP_NORM = "popart_core.ClipNormSettings"


class SGD(Optimizer):
    """`SGD(pyd, clip_norm_settings=[], accumulatorAndMomentum=Combined,
    accumType=DataType.UNDEFINED, accl1Type=DataType.UNDEFINED, debugContext="sgd")`.

    `pyd` (the original's name for it) maps `defaultLearningRate` (0.1), `defaultWeightDecay` (0), `defaultMomentum`
    (0), `defaultDampening` (0), `defaultVelocityScaling` (1), `lossScaling` (1) and
    `nesterov` (0) to `(value, isConst)` tuples.
    """

    NAME = "SGD"
    FAMILY = "SGD"
    HYPER_PARAMETERS = (
        HyperParameter("learningRate", "defaultLearningRate", 0.1),
        HyperParameter("weightDecay", "defaultWeightDecay", 0.0),
        HyperParameter("momentum", "defaultMomentum", 0.0),
        HyperParameter("dampening", "defaultDampening", 0.0),
        HyperParameter("velocityScaling", "defaultVelocityScaling", 1.0),
        HyperParameter(_NESTEROV, _NESTEROV, 0.0),
    )

    def __init__(
        self,
        pyd: Mapping[str, Any] | None = None,
        clip_norm_settings: list[ClipNormSettings] | None = None,
        accumulatorAndMomentum: SGDAccumulatorAndMomentum = SGDAccumulatorAndMomentum.Combined,  # noqa: N803
        accumType: DataType = DataType.UNDEFINED,  # noqa: N803
        accl1Type: DataType = DataType.UNDEFINED,  # noqa: N803
        debugContext: Any = "sgd",  # noqa: N803
    ) -> None:
        super().__init__(
            pyd or {},
            check_clip_norm_settings(clip_norm_settings or [], "SGD clip_norm_settings"),
        )
        self._mode = check_enum(
            accumulatorAndMomentum, SGDAccumulatorAndMomentum, "SGD accumulatorAndMomentum"
        )
        self._accum_type = storage_type(accumType, "SGD accumType")
        self._accl1_type = storage_type(accl1Type, "SGD accl1Type")
        self._debug_context = debugContext

    # -- the original's value maps ----------------------------------------------------------

    def learningRates(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("learningRate")

    def weightDecays(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("weightDecay")

    def momentums(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("momentum")

    def dampenings(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("dampening")

    def velocityScalings(self) -> OptimizerValueMap:  # noqa: N802
        return self.value_map("velocityScaling")

    def nesterov(self) -> OptimizerValueMap:
        return self.value_map(_NESTEROV)

    # -- the program -----------------------------------------------------------------------

    def keeps_velocity(self, weight_id: str, accumulating: bool) -> bool:
        momentum = self.value(weight_id=weight_id, key="momentum")
        return accumulating or not momentum.isConst() or momentum.val() != 0

    def state_slots(self, weight_id: str, accumulating: bool) -> list[StateSlot]:
        if not self.keeps_velocity(weight_id, accumulating):
            return []
        # SGD1's Accl___ is added with the weight gradient's info and default variable
        # settings, so it is not grouped as a grouped weight is; SGD2's Accl1___ is
        # (willow/src/patterns/sgd1decompose.cpp addAcclInTensor, sgd2decompose.cpp).
        separate = self._mode is SGDAccumulatorAndMomentum.Separate
        return [StateSlot(self._velocity_prefix(), self._accl1_type, grouped=separate)]

    def _velocity_prefix(self) -> str:
        # The original names the Combined mode's accumulator-and-velocity `Accl___<w>` and the
        # Separate mode's velocity `Accl1___<w>` (willow/src/patterns/sgd2decompose.cpp).
        if self._mode is SGDAccumulatorAndMomentum.Separate:
            return reserved_names.reservedAccl1Prefix()
        return reserved_names.reservedAcclPrefix()

    def apply(self, update: WeightUpdate) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        weight, gradient, state = update.weight, update.gradient, update.state
        hyper, loss_scaling, weight_id = update.hyper, update.loss_scaling, update.weight_id
        lr, wd, dm = hyper("learningRate"), hyper("weightDecay"), hyper("dampening")
        regularised = gradient / loss_scaling + wd * weight
        velocity_prefix = self._velocity_prefix()
        if velocity_prefix not in state:
            return weight - lr * (1 - dm) * regularised, {}
        mm, vs = hyper("momentum"), hyper("velocityScaling")
        velocity = state[velocity_prefix] * mm + vs * (1 - dm) * regularised
        nesterov = self.value(_NESTEROV, weight_id)
        if nesterov.isConst() and nesterov.val() == 0:
            step = velocity / vs
        elif nesterov.isConst():
            step = regularised + mm * velocity / vs
        else:  # a non-const switch: chosen when the program runs
            on = tf.cast(tf.not_equal(hyper(_NESTEROV), 0), tf.float32)
            step = on * (regularised + mm * velocity / vs) + (1 - on) * velocity / vs
        return weight - lr * step, {velocity_prefix: velocity}

    def structure(self) -> tuple:
        return (self.FAMILY, self._mode, self._accum_type, self._accl1_type)

    def structure_description(self) -> str:
        return (
            f"SGD accumulatorAndMomentum={self._mode.name}, accumType={self._accum_type}, "
            f"accl1Type={self._accl1_type}"
        )

    def _check_values(self, values: dict[str, OptimizerValue], where: str) -> None:
        check_learning_rate(values, "SGD", where)
        check_non_negative(
            values,
            {"weightDecay": "weight decay", "momentum": "momentum", "dampening": "dampening"},
            where,
        )
        if values["velocityScaling"].val() <= 0:
            raise popart_exception(
                f"Non-positive velocity scaling ({values['velocityScaling'].val()}) for the "
                f"{where} value"
            )
        if values[_NESTEROV].val() != 0 and values["dampening"].val() != 0:
            raise popart_exception(
                f"Nesterov momentum is on for the {where} value, so the dampening should be "
                f"zero, got {values['dampening'].val()}"
            )


class ConstSGD(SGD):
    """`ConstSGD(learning_rate, weight_decay=0.0, loss_scaling=1.0, clip_norm_settings=[])`:
    SGD with const learning rate, weight decay and loss scaling and default momentum,
    dampening and velocity scaling (kept for backwards compatibility, as in the original)."""

    NAME = "ConstSGD"

    @binding(
        "popart_core.ConstSGD",
        Arg("learning_rate", FLOAT),
        Arg("weight_decay", FLOAT, 0.0),
        Arg("loss_scaling", FLOAT, 1.0),
        Arg("clip_norm_settings", ListOf(InstanceOf(ClipNormSettings, _CLIP_NORM)), (), "[]"),
        constructor=True,
    )  # the constructor popart.cpp binds: another type is pybind11's TypeError
    def __init__(
        self,
        learning_rate: float,
        weight_decay: float = 0.0,
        loss_scaling: float = 1.0,
        clip_norm_settings: Sequence[ClipNormSettings] = (),
    ) -> None:
        super().__init__(
            {
                "defaultLearningRate": (learning_rate, True),
                "defaultWeightDecay": (weight_decay, True),
                "lossScaling": (loss_scaling, True),
            },
            list(clip_norm_settings),
        )
