"""The enums builder methods take, numbered like the original's.

Builder methods also accept these values as plain integers, as member-name
strings, or as members of any other enum with the same member names, so a
session module that defines its own copy still works with the builder.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from openipu._src.popart.errors import IncompatibleArgumentsError, popart_exception


class RecomputeType(enum.IntEnum):
    Undefined = 0
    Checkpoint = 1
    Recompute = 2
    Recomputed = 3


class ReductionType(enum.IntEnum):
    Sum = 0
    Mean = 1
    NoReduction = 2


class ScatterReduction(enum.IntEnum):
    Sum = 0
    Max = 1
    Min = 2
    Mul = 3
    NoReduction = 4


class InitType(enum.IntEnum):
    NoInit = 0
    Zero = 1


class TensorRemapType(enum.IntEnum):
    FwdBwdReverse = 0
    FwdBwd = 1
    Fwd = 2


class CollectiveOperator(enum.IntEnum):
    Add = 0
    Mean = 1
    Mul = 2
    Min = 3
    Max = 4
    LogicalAnd = 5
    LogicalOr = 6
    SquareAdd = 7
    Local = 8


class CommGroupType(enum.IntEnum):
    All = 0
    Consecutive = 1
    Orthogonal = 2
    Ungrouped = 3


EnumT = TypeVar("EnumT", bound=enum.IntEnum)


def coerce_enum(value: Any, enum_type: type[EnumT], what: str) -> EnumT:
    """`value` as a member of `enum_type`; `what` names the argument in the error."""
    if isinstance(value, enum_type):
        return value
    name = value.name if isinstance(value, enum.Enum) else value
    if isinstance(name, str):
        if name in enum_type.__members__:
            return enum_type.__members__[name]
    elif not isinstance(value, bool):
        try:
            return enum_type(int(value))
        except (TypeError, ValueError):
            pass
    allowed = ", ".join(enum_type.__members__)
    # The original's bindings take the enum type itself: pybind11's TypeError for anything else.
    raise IncompatibleArgumentsError(f"{what}: {value!r} is not a {enum_type.__name__} ({allowed})")


# PopART writes the loss reduction into the ONNX node as a string.
_REDUCTION_ATTRIBUTE_VALUE = {
    ReductionType.Sum: "Sum",
    ReductionType.Mean: "Mean",
    ReductionType.NoReduction: "None",
}


def reduction_attribute_value(value: Any, what: str = "reduction") -> str:
    return _REDUCTION_ATTRIBUTE_VALUE[coerce_enum(value, ReductionType, what)]


def reduction_type_of_attribute(value: str) -> ReductionType:
    """The ReductionType a loss node's `reduction` attribute names ("Sum", "Mean", "None")."""
    for reduction, attribute in _REDUCTION_ATTRIBUTE_VALUE.items():
        if attribute == value:
            return reduction
    raise popart_exception(f"reduction: {value!r} is not Sum, Mean or None")
