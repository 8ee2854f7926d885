"""Read-only properties that give an attribute of an object a wrapper holds."""

from __future__ import annotations


def delegated(holder: str, name: str) -> property:
    """A read-only property giving `getattr(getattr(self, holder), name)`."""
    return property(lambda self: getattr(getattr(self, holder), name))
