"""The overloads popart.cpp binds for some `_BuilderCore` methods, for pybind11's type checks.

A call no overload takes is pybind11's TypeError ("addInputTensor(): incompatible function
arguments"); see pybind_arguments.py. The annotation methods' overloads tell a node's names
(a str, a set or a list of them) from a value for new nodes.
"""

from __future__ import annotations

from typing import Any

from openipu._src.popart.builder.tensor_info import TensorInfo
from openipu._src.popart.pybind_arguments import (
    DEBUG_CONTEXT,
    INT64,
    REQUIRED,
    STR,
    Arg,
    Caster,
    InstanceOf,
    ListOf,
    SetOf,
    Signature,
)

BUILDER = "popart_core._BuilderCore"
_CONTEXT = "popart_core.AttributeContextManager"


class _InputSettings(Caster):
    """An InputSettings, read by attribute: the builder does not import the session API
    (settings_encoding.py)."""

    text = "popart_core.InputSettings"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if all(hasattr(value, name) for name in ("tileSet", "replicatedStreamMode")):
            return value
        raise self.refuse(value, where)


_INFO = Arg("tensorInfo", InstanceOf(TensorInfo, "popart._internal.ir.TensorInfo"))
_TYPE_AND_SHAPE = (Arg("dataType", STR), Arg("shape", ListOf(INT64)))
_SETTINGS = Arg("settings", _InputSettings(), None, "<popart_core.InputSettings object>")
_DEBUG = Arg("debugContext", DEBUG_CONTEXT, "")

ADD_INPUT_TENSOR = (
    Signature((_INFO, _DEBUG), "str"),
    Signature((*_TYPE_AND_SHAPE, _DEBUG), "str"),
    Signature((_INFO, _SETTINGS, _DEBUG), "str"),
    Signature((*_TYPE_AND_SHAPE, _SETTINGS, _DEBUG), "str"),
)

GET_TENSOR_SHAPE = (Signature((Arg("id", STR),), "List[int]"),)


def _annotation(*names: Caster, value_default: Any) -> tuple[Signature, ...]:
    """(nodeOutputNames, value: int = 0) for each kind of names, then (value) for new nodes."""
    value = Arg("value", INT64, 0)
    for_nodes = tuple(Signature((Arg("nodeOutputNames", kind), value)) for kind in names)
    return (*for_nodes, Signature((Arg("value", INT64, value_default),), _CONTEXT))


# executionPhase's form for new nodes defaults its value to 0, the others need one.
ANNOTATIONS = {
    "virtualGraph": _annotation(STR, SetOf(STR), ListOf(STR), value_default=REQUIRED),
    "pipelineStage": _annotation(STR, value_default=REQUIRED),
    "executionPhase": _annotation(STR, SetOf(STR), value_default=0),
}
