"""Integer arguments that the original converts with `int()` instead of checking their type."""

from __future__ import annotations

from typing import Any


def as_int(value: Any, what: str) -> int:
    """`int(value)` as the original computes it (2.0 and "2" give 2), with an error that
    names the argument when the conversion fails."""
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{what} must be an int, got {value!r}") from None


def as_attr_int(value: Any, what: str) -> int:
    """`value` as an op's int attribute takes it (TensorFlow's op_def_library._MakeInt): any
    number int() accepts (2.5 gives 2), but a str is a TypeError, as is what int() refuses."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} must be an int, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an int, got {value!r}") from None
