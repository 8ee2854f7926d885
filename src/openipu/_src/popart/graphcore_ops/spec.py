"""What one ai.graphcore operator is: inputs, outputs, attributes with types and defaults.

These operators have no ONNX schema, so `table.py` declares them with the classes here;
the builder writes, the shape inference types and the lowering reads nodes by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onnx import AttributeProto

DOMAIN = "ai.graphcore"
VERSION = 1  # PopART's only ai.graphcore opset
UNBOUNDED = 2**31 - 1  # the upper bound of an input or output count without one


class _Marker:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# An attribute every node must carry: the builder's parameter has no default.
REQUIRED: Any = _Marker("REQUIRED")
# An optional attribute with no value: written only when given; readers see None.
ABSENT: Any = _Marker("ABSENT")


@dataclass(frozen=True)
class Attribute:
    """An attribute of an operator: its ONNX type and the value a node without it means."""

    name: str
    type: AttributeProto.AttributeType
    default: Any = REQUIRED


def attribute_of_type(attribute_type: AttributeProto.AttributeType):
    """A constructor of Attributes of one type: `INT("axis", -1)`."""

    def make(name: str, default: Any = REQUIRED) -> Attribute:
        return Attribute(name, attribute_type, default)

    return make


INT = attribute_of_type(AttributeProto.INT)
FLOAT = attribute_of_type(AttributeProto.FLOAT)
STRING = attribute_of_type(AttributeProto.STRING)
INTS = attribute_of_type(AttributeProto.INTS)
FLOATS = attribute_of_type(AttributeProto.FLOATS)
STRINGS = attribute_of_type(AttributeProto.STRINGS)
GRAPH = attribute_of_type(AttributeProto.GRAPH)


@dataclass(frozen=True)
class OpSpec:
    """One ai.graphcore operator as PopART's builder writes it.

    `inputs` and `outputs` are (min, max) counts. `typed` says whether shape inference can
    type its outputs from its inputs (a shape rule is registered for it); `lowered`
    whether a TensorFlow lowering exists.
    """

    op_type: str
    inputs: tuple[int, int]
    outputs: tuple[int, int] = (1, 1)
    attributes: tuple[Attribute, ...] = ()
    typed: bool = True
    lowered: bool = True
    domain: str = DOMAIN
    version: int = VERSION

    def attribute(self, name: str) -> Attribute:
        for attribute in self.attributes:
            if attribute.name == name:
                return attribute
        raise KeyError(f"{self.op_type} ({self.domain}) has no attribute {name!r}")

    def default(self, name: str) -> Any:
        """The default of attribute `name`; an error for a required one."""
        default = self.attribute(name).default
        if default is REQUIRED:
            raise KeyError(f"{self.op_type} ({self.domain}): attribute {name!r} is required")
        return _reader_value(default)

    @property
    def defaults(self) -> dict[str, Any]:
        """name -> the value a node without the attribute means (None when ABSENT)."""
        return {
            attribute.name: _reader_value(attribute.default)
            for attribute in self.attributes
            if attribute.default is not REQUIRED
        }

    def with_defaults(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """A node's attribute values with the defaults of those it does not carry."""
        return {**self.defaults, **given}


def _reader_value(default: Any) -> Any:
    # Lists are declared as tuples (the table is immutable); readers get a fresh list, like a
    # decoded attribute.
    if default is ABSENT:
        return None
    return list(default) if isinstance(default, tuple) else default
