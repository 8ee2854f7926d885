"""Hyper-parameter values: `OptimizerValue`, `OptimizerValueMap`, and reading the dicts the
optimizers' constructors take (`{"defaultLearningRate": (0.01, False), ...}`).

A const value is compiled into the program; a non-const one lives in a device variable that
`updateOptimizerFromHost` can change between runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from openipu._src.popart.errors import OptionTypeError, popart_exception


class OptimizerValue:
    """`OptimizerValue()`, `OptimizerValue(val)` (const), `OptimizerValue(val, isConst)` or
    `OptimizerValue((val, isConst))`."""

    def __init__(self, *args: Any) -> None:
        if len(args) == 1 and isinstance(args[0], tuple):
            args = args[0]
        if len(args) > 2:
            raise OptionTypeError(f"OptimizerValue takes (val, isConst), got {args!r}")
        value = args[0] if args else 0.0
        is_const = args[1] if len(args) == 2 else True
        self._val = _float(value, "OptimizerValue val")
        if not isinstance(is_const, (bool, np.bool_)):
            raise OptionTypeError(
                f"OptimizerValue isConst must be a bool, got {is_const!r} "
                f"({type(is_const).__name__})"
            )
        self._is_const = bool(is_const)

    def val(self) -> float:
        return self._val

    def isConst(self) -> bool:  # noqa: N802 - the original's names
        return self._is_const

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OptimizerValue):
            return NotImplemented
        return (self._val, self._is_const) == (other._val, other._is_const)

    def __hash__(self) -> int:
        return hash((self._val, self._is_const))

    def __repr__(self) -> str:
        return f"OptimizerValue({self._val!r}, isConst={self._is_const})"


class OptimizerValueMap:
    """One hyper-parameter's default value and its weight-specific values."""

    def __init__(self, default: OptimizerValue, specific: Mapping[str, OptimizerValue]) -> None:
        self._default = default
        self._specific = dict(specific)

    def getDefault(self) -> OptimizerValue:  # noqa: N802
        return self._default

    def get(self, weightId: str) -> OptimizerValue:  # noqa: N803
        """The value for one weight (its specific value, or the default)."""
        return self._specific.get(weightId, self._default)

    def hasSpecific(self, weightId: str) -> bool:  # noqa: N802, N803
        return weightId in self._specific

    def getSpecifics(self) -> dict[str, OptimizerValue]:  # noqa: N802
        return dict(self._specific)

    def __repr__(self) -> str:
        return f"OptimizerValueMap(default={self._default!r}, specific={self._specific!r})"


@dataclass(frozen=True)
class HyperParameter:
    """A hyper-parameter an optimizer takes: its key for weights (`insertSpecific`), its key
    for the default (the constructor's dict) and its default value."""

    key: str
    default_key: str
    default: float


def _float(value: Any, where: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise OptionTypeError(f"{where} must be a float, got {value!r} ({type(value).__name__})")
    return float(value)


def parse_values(
    values: Any, known: Mapping[str, str], optimizer: str, where: str
) -> dict[str, OptimizerValue]:
    """`{key: (value, isConst)}` read into `{canonical key: OptimizerValue}`.

    `known` maps every accepted key (aliases included) to its canonical key. Keys must be
    strings and values `(float, bool)` tuples (or OptimizerValues), as in the original.
    """
    if not isinstance(values, Mapping):
        raise OptionTypeError(
            f"{where} takes a dict {{name: (value, isConst)}}, got {type(values).__name__}"
        )
    parsed: dict[str, OptimizerValue] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise OptionTypeError(f"{where}: keys must be str, got {key!r} ({type(key).__name__})")
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise popart_exception(
                f"Invalid {optimizer} key, {key}, it is not one of {sorted(known)}.{hint}"
            )
        parsed[known[key]] = _optimizer_value(value, f"{where}[{key!r}]")
    return parsed


def _optimizer_value(value: Any, where: str) -> OptimizerValue:
    if isinstance(value, OptimizerValue):
        return value
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not isinstance(value[1], (bool, np.bool_))
    ):
        raise OptionTypeError(
            f"{where} must be a tuple (value: float, isConst: bool), got {value!r} "
            f"({type(value).__name__})"
        )
    return OptimizerValue(_float(value[0], f"{where} value"), bool(value[1]))
