"""What every optimizer has: hyper-parameters (default and per-weight values, const or not),
loss scaling, and the rules `updateOptimizerFromHost` checks a replacement against.

A concrete optimizer (SGD, Adam, Adaptive; one per module) names its hyper-parameters, the
optimizer state it keeps per weight (`StateSlot`s, named with PopART's reserved prefixes) and
how it updates a weight (`apply`), as TensorFlow operations the training program runs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

import numpy as np
import tensorflow as tf

from openipu._src.popart.builder.tensor_info import DataType
from openipu._src.popart.errors import OptionTypeError, popart_exception
from openipu._src.popart.optimizers.clip_norm import ClipNormSettings
from openipu._src.popart.optimizers.values import (
    HyperParameter,
    OptimizerValue,
    OptimizerValueMap,
    parse_values,
)

LOSS_SCALING = "lossScaling"

# A hyper-parameter's value inside the program: a Python float (const) or a scalar tensor.
Value: TypeAlias = float | tf.Tensor


@dataclass(frozen=True)
class StateSlot:
    """One optimizer-state tensor per weight: `<prefix><weight id>`.

    `dtype` None means the weight's own type; `scalar` slots (Adam's step count) have shape [].
    `initial(weight)` gives its starting value (zeros unless the optimizer says otherwise).
    `grouped`: whether a grouped weight's state is grouped as the weight (one value per
    group); if not, it has one replica's shape, each replica its own copy.
    """

    prefix: str
    dtype: tf.DType | None = None
    scalar: bool = False
    initial: Callable[[np.ndarray], np.ndarray] | None = None
    grouped: bool = True

    def signature(self, weight: np.ndarray) -> tuple[tf.DType, tuple[int, ...]]:
        dtype = self.dtype or tf.as_dtype(weight.dtype)
        return dtype, () if self.scalar else tuple(weight.shape)

    def initial_value(self, weight: np.ndarray) -> np.ndarray:
        dtype, shape = self.signature(weight)
        if self.initial is not None:
            return np.asarray(self.initial(weight)).astype(dtype.as_numpy_dtype).reshape(shape)
        return np.zeros(shape, dtype.as_numpy_dtype)


def storage_type(data_type: Any, where: str) -> tf.DType | None:
    """A state tensor's type from a popart.DataType: FLOAT, FLOAT16, or UNDEFINED (None: the
    weight's own type)."""
    if isinstance(data_type, str):
        names = {member.name: member for member in DataType}
        if data_type.upper() not in names:
            raise OptionTypeError(f"{where} must be a popart.DataType, got {data_type!r}")
        data_type = names[data_type.upper()]
    if not isinstance(data_type, DataType):
        raise OptionTypeError(
            f"{where} must be a popart.DataType, got {data_type!r} ({type(data_type).__name__})"
        )
    allowed = {DataType.FLOAT: tf.float32, DataType.FLOAT16: tf.float16, DataType.UNDEFINED: None}
    if data_type not in allowed:
        raise popart_exception(
            f"{where} is {data_type.name}: optimizer state types are FLOAT, FLOAT16 or "
            "UNDEFINED (the weight's type)"
        )
    return allowed[data_type]


@dataclass(frozen=True)
class WeightUpdate:
    """What an optimizer's update of one weight starts from, inside the program.

    `gradient` is accumulated and reduced over replicas but still loss-scaled; `state` holds
    the weight's state tensors by prefix; `hyper(key)` gives its hyper-parameter values.
    Weight, gradient and state are float32 (whatever their storage types).
    """

    weight_id: str
    weight: tf.Tensor
    gradient: tf.Tensor
    state: dict[str, tf.Tensor]
    hyper: Callable[[str], Value]
    loss_scaling: Value


class Optimizer:
    """`popart.Optimizer`: the base of SGD, Adam and Adaptive."""

    NAME: ClassVar[str] = "Optimizer"
    # The optimizer type a session is built for; updateOptimizerFromHost keeps it.
    FAMILY: ClassVar[str] = "Optimizer"
    HYPER_PARAMETERS: ClassVar[tuple[HyperParameter, ...]] = ()
    # Deprecated spellings of default keys: alias -> canonical default key.
    KEY_ALIASES: ClassVar[dict[str, str]] = {}

    def __init__(self, values: Mapping[str, Any], clip_norm_settings: list[ClipNormSettings]):
        known = {hp.default_key: hp.key for hp in self.HYPER_PARAMETERS}
        known[LOSS_SCALING] = LOSS_SCALING
        known.update({alias: known[target] for alias, target in self.KEY_ALIASES.items()})
        self._warn_aliases(values)
        parsed = parse_values(values, known, self.NAME, f"{self.NAME}(values)")
        self._defaults = {
            hp.key: parsed.get(hp.key, OptimizerValue(hp.default, True))
            for hp in self.HYPER_PARAMETERS
        }
        self._loss_scaling = parsed.get(LOSS_SCALING, OptimizerValue(1.0, True))
        self._specific: dict[str, dict[str, OptimizerValue]] = {}
        self._clip_norm_settings = list(clip_norm_settings)
        self._accum_type: tf.DType | None = None  # the gradient accumulators' (None: weight's)
        # Only 0 (and NaN) is refused: willow/src/optimizer.cpp accepts a negative scaling.
        if not (self._loss_scaling.val() > 0 or self._loss_scaling.val() < 0):
            raise popart_exception(
                f"Loss scaling cannot be 0: {self.NAME} lossScaling is {self._loss_scaling.val()}"
            )
        self._check_values(self._defaults, "default")

    def _warn_aliases(self, values: Any) -> None:
        import logging

        if isinstance(values, Mapping):
            for alias, target in self.KEY_ALIASES.items():
                if alias in values:
                    logging.getLogger("popart").warning(
                        "%s key '%s' is deprecated: use '%s'", self.NAME, alias, target
                    )

    # -- the original's members ---------------------------------------------------------------

    def insertSpecific(self, weightId: str, values: Mapping[str, Any]) -> None:  # noqa: N802, N803
        """Values for one weight; keys left out take the current defaults."""
        if not isinstance(weightId, str):
            raise OptionTypeError(
                f"{self.NAME}.insertSpecific weightId must be a str, got {weightId!r}"
            )
        known = {hp.key: hp.key for hp in self.HYPER_PARAMETERS}
        parsed = parse_values(values, known, self.NAME, f"{self.NAME}.insertSpecific(values)")
        specific = {**self._defaults, **parsed}
        self._check_values(specific, f"weight '{weightId}'")
        self._specific[weightId] = specific

    def getLossScalingVal(self) -> float:  # noqa: N802
        return self._loss_scaling.val()

    def value_map(self, key: str) -> OptimizerValueMap:
        return OptimizerValueMap(
            self._defaults[key], {w: values[key] for w, values in self._specific.items()}
        )

    # -- what sessions use ----------------------------------------------------------------------

    @property
    def loss_scaling(self) -> OptimizerValue:
        return self._loss_scaling

    @property
    def clip_norm_settings(self) -> list[ClipNormSettings]:
        return list(self._clip_norm_settings)

    @property
    def hyper_parameter_keys(self) -> list[str]:
        return [hp.key for hp in self.HYPER_PARAMETERS]

    def value(self, key: str, weight_id: str) -> OptimizerValue:
        return self._specific.get(weight_id, self._defaults)[key]

    def specific_weight_ids(self) -> list[str]:
        return list(self._specific)

    def state_slots(self, weight_id: str, accumulating: bool) -> list[StateSlot]:
        """The optimizer state kept for one weight (`accumulating`: gradient accumulation)."""
        raise NotImplementedError

    def accumulator_dtype(self, weight_dtype: tf.DType) -> tf.DType:
        """The type of a weight's gradient accumulator (accum_type; UNDEFINED: the weight's)."""
        return self._accum_type or weight_dtype

    def apply(self, update: WeightUpdate) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """One update: the new weight and its new state (by prefix)."""
        raise NotImplementedError

    def structure(self) -> tuple:
        """What the program is built for besides hyper-parameter values (modes, state types).

        A replacement optimizer must have the same structure."""
        return (self.FAMILY,)

    def structure_description(self) -> str:
        return self.NAME

    def check_replacement(self, new: Optimizer, weight_ids: list[str]) -> None:
        """updateOptimizerFromHost's rules: raises a popart_exception naming what differs."""
        if new.FAMILY != self.FAMILY:
            raise popart_exception(
                f"updateOptimizerFromHost: the session was created with a {self.FAMILY} "
                f"optimizer, which cannot be replaced by a {new.FAMILY} one (the optimizer's "
                "type decides the program)"
            )
        if new.structure() != self.structure():
            raise popart_exception(
                f"updateOptimizerFromHost: the new optimizer ({new.structure_description()}) "
                f"does not match the session's ({self.structure_description()}): modes, weight "
                "decay modes and state types must stay the same"
            )
        if new.clip_norm_settings != self.clip_norm_settings:
            raise popart_exception(
                "updateOptimizerFromHost: the clip norm settings differ from the session's "
                f"({new.clip_norm_settings} vs {self.clip_norm_settings}); they cannot change"
            )
        pairs: list[tuple[str, str | None, OptimizerValue, OptimizerValue]] = [
            (LOSS_SCALING, None, self.loss_scaling, new.loss_scaling)
        ]
        for key in self.hyper_parameter_keys:
            for weight_id in weight_ids:
                pairs.append(
                    (key, weight_id, self.value(key, weight_id), new.value(key, weight_id))
                )
        for key, pair_weight_id, old, replacement in pairs:
            where = key if pair_weight_id is None else f"{key} of weight '{pair_weight_id}'"
            if old.isConst() != replacement.isConst():
                kind = "const" if old.isConst() else "non-const"
                raise popart_exception(
                    f"updateOptimizerFromHost: {where} is {kind} in the session's optimizer and "
                    f"{'non-const' if old.isConst() else 'const'} in the new one: a value cannot "
                    "change between const and non-const"
                )
            if old.isConst() and old.val() != replacement.val():
                raise popart_exception(
                    f"updateOptimizerFromHost: {where} is const ({old.val()}) and cannot change to "
                    f"{replacement.val()}; make it non-const (value, False) to change it"
                )

    def copy(self) -> Optimizer:
        return copy.deepcopy(self)

    # -- validation ------------------------------------------------------------------------------

    def _check_values(self, values: dict[str, OptimizerValue], where: str) -> None:
        """The original's checks on values (negative rates, ...)."""

    def __repr__(self) -> str:
        values = ", ".join(
            f"{k}={v.val()}{'' if v.isConst() else '*'}" for k, v in self._defaults.items()
        )
        return f"{self.NAME}({values}, lossScaling={self._loss_scaling.val()})"


def check_non_negative(values: dict[str, OptimizerValue], keys: dict[str, str], where: str) -> None:
    """Raises "Negative <name> ..." for a negative value of any of `keys` (key -> name)."""
    for key, name in keys.items():
        if values[key].val() < 0:
            raise popart_exception(
                f"Negative {name} ({values[key].val()}) for the {where} value, bailing as this "
                "might be a user error"
            )


def check_learning_rate(values: dict[str, OptimizerValue], optimizer: str, where: str) -> None:
    rate = values["learningRate"]
    check_non_negative(values, {"learningRate": "learning rate"}, where)
    if rate.isConst() and rate.val() == 0:
        raise popart_exception(
            f"Constant, zero learning rate in {optimizer} ({where} value): the weights could "
            "never change; freeze them instead, or make the learning rate non-const"
        )


def check_eps(values: dict[str, OptimizerValue], where: str) -> None:
    if values["eps"].val() <= 0:
        raise popart_exception(f"Non-positive eps ({values['eps'].val()}) for the {where} value")
