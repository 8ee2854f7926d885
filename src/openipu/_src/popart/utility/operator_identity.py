"""`popart.OperatorIdentifier` and `popart.OpDefinition` (spec 13.8).

An operator is identified by its domain, type and opset version, the key of our lowering
registry; the spec documents no members of OpDefinition, so it keeps what the original's
constructor takes (inputs, outputs, attributes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OperatorIdentifier:
    domain: str
    type: str
    version: int
    numInputs: int | tuple[int, int] = 0
    numOutputs: int = 0

    def __post_init__(self) -> None:
        for name in ("domain", "type"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(
                    f"OperatorIdentifier: {name} must be a str, got {getattr(self, name)!r}"
                )
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(
                f"OperatorIdentifier: version must be a positive int, got {self.version!r}"
            )

    def __str__(self) -> str:
        return f"{self.domain}.{self.type}:{self.version}"


@dataclass(frozen=True)
class OpDefinitionInput:
    """`OpDefinition::Input`: a named input and the data types it takes."""

    name: str
    supportedTensors: Sequence[Any]  # noqa: N815 - the original's field names
    constant: bool = False


@dataclass(frozen=True)
class OpDefinitionOutput:
    """`OpDefinition::Output`: a named output and the data types it gives."""

    name: str
    supportedTensors: Sequence[Any]  # noqa: N815


@dataclass(frozen=True)
class OpDefinitionAttribute:
    """`OpDefinition::Attribute`: the values an attribute takes, as a regex ("*": any)."""

    supportedValuesRegex: str = "*"  # noqa: N815


@dataclass(frozen=True)
class OpDefinition:
    inputs: Sequence[Any] = field(default_factory=tuple)
    outputs: Sequence[Any] = field(default_factory=tuple)
    attributes: Mapping[str, Any] = field(default_factory=dict)

    Input = OpDefinitionInput
    Output = OpDefinitionOutput
    Attribute = OpDefinitionAttribute
