"""Names for the kinds of values the engine passes around, for its type hints.

TensorFlow has no type information for mypy, so a tensor is `Any` to the checker; these
names say what is meant where a hint cannot say more.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

#: A `tf.nest` structure: tensors (or numbers, arrays, operations) in lists, tuples and
#: dicts, or None.
Nested: TypeAlias = Any


class Infeed(Protocol):
    """What a device loop reads its elements from (an infeed queue, or stacked inputs)."""

    def _fetch_stacked(self, count: int) -> tuple[Nested, ...]:
        """The next `count` elements, stacked: the loop's arguments, each of leading
        dimension `count`."""
        ...

    def _fetch_one(self) -> Nested:
        """The next element (for loops of unknown length)."""
        ...
