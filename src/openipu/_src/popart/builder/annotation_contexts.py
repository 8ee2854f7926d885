"""_BuilderCore methods that annotate nodes: on a named node, or on every node made in a `with`.

Most of them have two forms, like the original's overloads:
`builder.virtualGraph("MatMul:0", 1)` annotates an existing node and
`with builder.virtualGraph(1): ...` annotates the nodes created inside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from onnx import AttributeProto

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.builder.attribute_values import attribute_value, make_attribute
from openipu._src.popart.builder.binding_signatures import ANNOTATIONS, BUILDER
from openipu._src.popart.builder.enums import RecomputeType, coerce_enum
from openipu._src.popart.builder.node_attributes import looks_like_output_names
from openipu._src.popart.builder.settings_encoding import (
    encode_comm_group,
    encode_tensor_location,
)
from openipu._src.popart.errors import incompatible_arguments, popart_exception
from openipu._src.popart.pybind_arguments import FLOAT, INT64, Arg, bind, binding

_NO_VALUE = object()
_CONTEXT = "popart_core.AttributeContextManager"


_SCOPE_NAMES = {
    "getPipelineStage": "Pipeline stage",
    "getVirtualGraph": "Virtual graph",
    "getExecutionPhase": "Execution phase",
}


class AttributeContextManager:
    """Applies one attribute to every node created while it is entered; nests and restores."""

    def __init__(self, core: AnnotationMethods, attribute: AttributeProto) -> None:
        self._core = core
        self._attribute = attribute

    def __enter__(self) -> AttributeContextManager:
        self._core._context_attributes.setdefault(self._attribute.name, []).append(self._attribute)
        return self

    def __exit__(self, *exception: object) -> None:
        self._core._context_attributes[self._attribute.name].pop()


class NameContextManager:
    """Prefixes the ids created while it is entered with `name/`."""

    def __init__(self, core: AnnotationMethods, name: str) -> None:
        self._core = core
        self._name = name

    def __enter__(self) -> NameContextManager:
        self._core._name_scope.append(self._name)
        return self

    def __exit__(self, *exception: object) -> None:
        self._core._name_scope.pop()


class AnnotationMethods:
    """virtualGraph, pipelineStage, executionPhase, recomputeOutput, ... and nameScope."""

    if TYPE_CHECKING:
        # Provided by _BuilderCore, the class these methods are mixed into.
        _name_scope: list[str]
        _context_attributes: dict[str, list[AttributeProto]]

        def _set_node_attribute(self, node_output_names: Any, name: str, value: Any) -> None: ...

        def getInt64NodeAttribute(self, attributeName: str, nodeOutputNames: Any) -> int: ...  # noqa: N802

    def _annotate(
        self,
        method: str,
        attribute_name: str,
        convert: Callable[[Any], Any],
        default: Any,
        args: tuple,
        kwargs: dict,
    ) -> AttributeContextManager | None:
        """Dispatch the (nodeOutputNames, value) and (value) overloads of an annotation method."""
        node_output_names = kwargs.pop("nodeOutputNames", kwargs.pop("nodeOutputName", _NO_VALUE))
        if node_output_names is _NO_VALUE and args and looks_like_output_names(args[0]):
            node_output_names, args = args[0], args[1:]
        value = kwargs.pop("value", _NO_VALUE)
        if args:
            if value is not _NO_VALUE or len(args) > 1:
                raise TypeError(f"{method}() got too many arguments")
            value = args[0]
        if kwargs:
            raise TypeError(f"{method}() got unexpected keyword arguments {sorted(kwargs)}")
        if value is _NO_VALUE:
            if default is _NO_VALUE:
                raise TypeError(f"{method}() missing the value argument")
            value = default
        converted = convert(value)
        if node_output_names is not _NO_VALUE:
            self._set_node_attribute(node_output_names, attribute_name, converted)
            return None
        return AttributeContextManager(self, make_attribute(attribute_name, converted, method))

    def _current(self, attribute_name: str) -> Any:
        stack = self._context_attributes.get(attribute_name)
        return attribute_value(stack[-1]) if stack else None

    def _required_current(self, attribute_name: str, method: str) -> Any:
        value = self._current(attribute_name)
        if value is None:
            # The original's words (willow/src/builder.cpp), e.g. "Virtual graph not set in
            # current scope." (its context_scope_test matches them).
            what = _SCOPE_NAMES.get(method, method)
            raise popart_exception(f"{what} not set in current scope.")
        return value

    def _annotate_index(
        self, method: str, attribute_name: str, args: tuple, kwargs: dict
    ) -> AttributeContextManager | None:
        """The overloads popart.cpp binds: (nodeOutputNames, value=0) or (value), an int."""
        _, values = bind(method, ANNOTATIONS[method], args, kwargs, owner=BUILDER)
        if "nodeOutputNames" in values:
            self._set_node_attribute(values["nodeOutputNames"], attribute_name, values["value"])
            return None
        return AttributeContextManager(
            self, make_attribute(attribute_name, values["value"], method)
        )

    def virtualGraph(self, *args: Any, **kwargs: Any) -> AttributeContextManager | None:  # noqa: N802
        """(nodeOutputNames, value=0) sets a node's IPU; (value) is a context for new nodes."""
        return self._annotate_index("virtualGraph", names.VIRTUAL_GRAPH, args, kwargs)

    def pipelineStage(self, *args: Any, **kwargs: Any) -> AttributeContextManager | None:  # noqa: N802
        return self._annotate_index("pipelineStage", names.PIPELINE_STAGE, args, kwargs)

    def executionPhase(self, *args: Any, **kwargs: Any) -> AttributeContextManager | None:  # noqa: N802
        return self._annotate_index("executionPhase", names.EXECUTION_PHASE, args, kwargs)

    def recomputeOutput(self, *args: Any, **kwargs: Any) -> AttributeContextManager | None:  # noqa: N802
        def convert(value: Any) -> int:
            return int(coerce_enum(value, RecomputeType, "recomputeOutput value"))

        return self._annotate(
            "recomputeOutput",
            names.RECOMPUTE_OUTPUT,
            convert,
            RecomputeType.Undefined,
            args,
            kwargs,
        )

    def outputTensorLocation(self, *args: Any, **kwargs: Any) -> AttributeContextManager | None:  # noqa: N802
        """(nodeOutputNames, value) or (value): a TensorLocation; None is the default location."""
        return self._annotate(
            "outputTensorLocation",
            names.OUTPUT_TENSOR_LOCATION,
            encode_tensor_location,
            None,
            args,
            kwargs,
        )

    # popart.cpp binds these with a float and two int64s: pybind11's TypeError for other values.
    @binding(BUILDER, Arg("value", FLOAT), returns=_CONTEXT)
    def schedulePriority(self, value: float) -> AttributeContextManager:  # noqa: N802
        return AttributeContextManager(
            self, make_attribute(names.SCHEDULE_PRIORITY, float(value), "schedulePriority")
        )

    @binding(BUILDER, Arg("type", INT64, 0), Arg("groupSize", INT64, 0), returns=_CONTEXT)
    def commGroup(self, type: int = 0, groupSize: int = 0) -> AttributeContextManager:  # noqa: N802, A002
        encoded = encode_comm_group((type, groupSize))
        return AttributeContextManager(
            self, make_attribute(names.COLLECTIVE_COMM_GROUP, encoded, "commGroup")
        )

    def outlineAttributes(self, arg0: dict) -> AttributeContextManager:  # noqa: N802
        """Key/value strings for outlining; nested contexts add to (and override) outer ones."""
        if not isinstance(arg0, dict):
            # The binding takes a py::dict: anything else is pybind11's TypeError (popart.cpp).
            raise incompatible_arguments(
                "outlineAttributes",
                [f"(self: {BUILDER}, arg0: dict) -> popart_core.KeyValueContextManager"],
                [arg0],
                f"outlineAttributes: expected a dict, got {arg0!r}",
            )
        outer = self._current(names.OUTLINE) or []
        pairs = dict(zip(outer[::2], outer[1::2], strict=True))
        pairs.update({str(key): str(value) for key, value in arg0.items()})
        flattened = [item for pair in pairs.items() for item in pair]
        return AttributeContextManager(
            self, make_attribute(names.OUTLINE, flattened, "outlineAttributes")
        )

    def nameScope(self, name: str) -> NameContextManager:  # noqa: N802
        if not isinstance(name, str):
            # The binding takes a std::string: anything else is pybind11's TypeError.
            raise incompatible_arguments(
                "nameScope",
                [f"(self: {BUILDER}, name: str) -> popart_core.NameContextManager"],
                [name],
                f"nameScope: name must be a str, got {name!r}",
            )
        return NameContextManager(self, name)

    def getNameScope(self, name: str = "") -> str:  # noqa: N802
        return "".join(scope + "/" for scope in self._name_scope) + name

    def getVirtualGraph(self, nodeOutputNames: Any = _NO_VALUE) -> int:  # noqa: N802
        if nodeOutputNames is _NO_VALUE:
            return self._required_current(names.VIRTUAL_GRAPH, "getVirtualGraph")
        return self.getInt64NodeAttribute(names.VIRTUAL_GRAPH, nodeOutputNames)

    def hasVirtualGraph(self) -> bool:  # noqa: N802
        return self._current(names.VIRTUAL_GRAPH) is not None

    def getPipelineStage(self) -> int:  # noqa: N802
        return self._required_current(names.PIPELINE_STAGE, "getPipelineStage")

    def hasPipelineStage(self) -> bool:  # noqa: N802
        return self._current(names.PIPELINE_STAGE) is not None

    def getExecutionPhase(self) -> int:  # noqa: N802
        return self._required_current(names.EXECUTION_PHASE, "getExecutionPhase")

    def hasExecutionPhase(self) -> bool:  # noqa: N802
        return self._current(names.EXECUTION_PHASE) is not None
