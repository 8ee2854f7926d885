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

from openipu._src.popart import pybind_arguments as pybind
from openipu._src.popart.errors import OptionTypeError, popart_exception


class OptimizerValue:
    """`OptimizerValue()`, `OptimizerValue(val)` (const), `OptimizerValue(val, isConst)` or
    `OptimizerValue((val, isConst))`, with the values converted as the original's bindings
    convert them (python/popart._internal.ir/bindings/op/optimizervalue.cpp)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) == 1 and not kwargs and isinstance(args[0], tuple):
            args = args[0]
            if len(args) != 2:
                raise OptionTypeError(
                    f"OptimizerValue takes a (val, isConst) pair, got {args!r} of {len(args)}"
                )
        value, is_const = _bind_arguments(args, kwargs)
        self._val = pybind_float(value, "OptimizerValue val")
        self._is_const = pybind_bool(is_const, "OptimizerValue isConst")

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


def _bind_arguments(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """(val, isConst) from the arguments of OptimizerValue(val=0.0, isConst=True)."""
    names = ("val", "isConst")
    unknown = sorted(set(kwargs) - set(names))
    if len(args) > 2 or unknown:
        raise OptionTypeError(
            f"OptimizerValue takes (val, isConst), got {args!r} and keywords {sorted(kwargs)}"
        )
    bound = dict(zip(names, args, strict=False))
    for name in names:
        if name in kwargs:
            if name in bound:
                raise OptionTypeError(f"OptimizerValue got two values for {name}")
            bound[name] = kwargs[name]
    return bound.get("val", 0.0), bound.get("isConst", True)


def pybind_float(value: Any, where: str) -> float:
    """`value` as a C++ float argument of the original's bindings: pybind11 converts any
    Python number (bools and NumPy scalars included), but no string."""
    if isinstance(value, (str, bytes)):
        raise OptionTypeError(f"{where} must be a float, got {value!r} ({type(value).__name__})")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise OptionTypeError(
            f"{where} must be a float, got {value!r} ({type(value).__name__})"
        ) from None


def pybind_bool(value: Any, where: str) -> bool:
    """`value` as a C++ bool argument converted by pybind11: True, False, None (False) and
    numbers (0 is False), NumPy's included; not strings or containers."""
    try:
        loaded: bool = pybind.BOOL.load(value, True, where)
    except pybind.Refused:
        raise OptionTypeError(
            f"{where} must be a bool, got {value!r} ({type(value).__name__})"
        ) from None
    return loaded


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
    # The original casts each value to std::pair<float, bool> after checking it is a tuple
    # (getOptimizerValueDictionary in python/popart/popart_core/popart.cpp).
    if isinstance(value, OptimizerValue):
        return value
    if not isinstance(value, tuple) or len(value) != 2:
        raise OptionTypeError(
            f"{where} must be a tuple (value: float, isConst: bool), got {value!r} "
            f"({type(value).__name__})"
        )
    return OptimizerValue(
        pybind_float(value[0], f"{where} value"), pybind_bool(value[1], f"{where} isConst")
    )
