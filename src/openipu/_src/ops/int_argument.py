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
