"""_BuilderCore methods that read and write attributes of nodes found by their outputs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from onnx import AttributeProto, NodeProto, helper

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.builder.attribute_values import attribute_value, make_attribute
from openipu._src.popart.builder.enums import RecomputeType, coerce_enum
from openipu._src.popart.errors import (
    IncompatibleArgumentsError,
    incompatible_arguments,
    popart_exception,
)
from openipu._src.popart.pybind_arguments import FLOAT, INT64, Caster, Refused


def output_name_set(node_output_names: Any) -> set[str]:
    """Node output names as a set, from one name or any collection of names."""
    if isinstance(node_output_names, str):
        return {node_output_names}
    if isinstance(node_output_names, Iterable) and all(
        isinstance(name, str) for name in node_output_names
    ):
        return set(node_output_names)
    # The bindings take a TensorId or a std::set<TensorId>: pybind11's TypeError otherwise.
    raise IncompatibleArgumentsError(
        f"node output names must be str or a set of str, got {node_output_names!r}"
    )


def looks_like_output_names(value: Any) -> bool:
    """True for the first argument of the node overloads (names), False for a value."""
    return isinstance(value, (str, set, frozenset, list, tuple))


class NodeAttributeMethods:
    """Generic node attributes and the per-node IPU annotations."""

    if TYPE_CHECKING:
        # Provided by _BuilderCore, the class these methods are mixed into.
        def _find_node(self, node_output_names: Any) -> NodeProto: ...

        def _touch(self) -> None: ...

        def add_node(
            self,
            op_type: str,
            inputs: Sequence[str],
            *,
            domain: str = ...,
            domain_version: int | None = None,
            attributes: Iterable[AttributeProto] = (),
            num_outputs: int = 1,
            debug_context: Any = "",
        ) -> list[str]: ...

    # -- generic attributes ------------------------------------------------------------------

    def addNodeAttribute(  # noqa: N802 - the original's name
        self, attributeName: str, attributeValue: Any, nodeOutputNames: Any
    ) -> None:
        node = self._find_node(nodeOutputNames)
        if any(attribute.name == attributeName for attribute in node.attribute):
            # The original's words (willow/src/builder_impl.cpp; builder_test compares them).
            raise popart_exception(f"Node already has attribute {attributeName}.")
        node.attribute.append(make_attribute(attributeName, attributeValue, f"node {node.op_type}"))
        self._touch()

    def nodeHasAttribute(self, attributeName: str, nodeOutputNames: Any) -> bool:  # noqa: N802
        return _find_attribute(self._find_node(nodeOutputNames), attributeName) is not None

    def getAllNodeAttributeNames(self, nodeOutputNames: Any) -> list[str]:  # noqa: N802
        return [attribute.name for attribute in self._find_node(nodeOutputNames).attribute]

    def removeNodeAttribute(self, attributeName: str, nodeOutputNames: Any) -> None:  # noqa: N802
        node = self._find_node(nodeOutputNames)
        attribute = _find_attribute(node, attributeName)
        if attribute is None:
            raise popart_exception(f"Cannot remove attribute {attributeName} as it does not exist.")
        node.attribute.remove(attribute)
        self._touch()

    def getInt64NodeAttribute(self, attributeName: str, nodeOutputNames: Any) -> int:  # noqa: N802
        return self._typed_attribute(attributeName, nodeOutputNames, AttributeProto.INT)

    def getInt64VectorNodeAttribute(self, attributeName: str, nodeOutputNames: Any) -> list[int]:  # noqa: N802
        return self._typed_attribute(attributeName, nodeOutputNames, AttributeProto.INTS)

    def getFloatNodeAttribute(self, attributeName: str, nodeOutputNames: Any) -> float:  # noqa: N802
        return self._typed_attribute(attributeName, nodeOutputNames, AttributeProto.FLOAT)

    def getFloatVectorNodeAttribute(self, attributeName: str, nodeOutputNames: Any) -> list[float]:  # noqa: N802
        return self._typed_attribute(attributeName, nodeOutputNames, AttributeProto.FLOATS)

    def getStringNodeAttribute(self, attributeName: str, nodeOutputNames: Any) -> str:  # noqa: N802
        return self._typed_attribute(attributeName, nodeOutputNames, AttributeProto.STRING)

    def getStringVectorNodeAttribute(self, attributeName: str, nodeOutputNames: Any) -> list[str]:  # noqa: N802
        return self._typed_attribute(attributeName, nodeOutputNames, AttributeProto.STRINGS)

    def _typed_attribute(self, name: str, node_output_names: Any, attribute_type: int) -> Any:
        node = self._find_node(node_output_names)
        attribute = _find_attribute(node, name)
        if attribute is None:
            raise popart_exception(f"Node does not have an attribute {name}.")
        if attribute.type != attribute_type:
            raise popart_exception(
                f"Attribute {name} is not {_TYPE_WORDS[attribute_type]}. ({node.op_type}'s is "
                f"{AttributeProto.AttributeType.Name(attribute.type)}, "
                f"not {AttributeProto.AttributeType.Name(attribute_type)})"
            )
        return attribute_value(attribute)

    def _set_node_attribute(self, node_output_names: Any, name: str, value: Any) -> None:
        """Set (or replace) an annotation attribute on the node with these outputs."""
        node = self._find_node(node_output_names)
        existing = _find_attribute(node, name)
        if existing is not None:
            node.attribute.remove(existing)
        node.attribute.append(make_attribute(name, value, f"node {node.op_type}"))
        self._touch()

    # -- per-node IPU annotations --------------------------------------------------------------

    def setAvailableMemoryProportion(  # noqa: N802
        self, nodeOutputNames: Any, availableMemoryProportion: float
    ) -> None:
        proportion = _converted(
            FLOAT, availableMemoryProportion, "setAvailableMemoryProportion",
            "(self: popart_core._BuilderCore, nodeOutputName: str, "
            "availableMemoryProportion: float) -> None",
            [nodeOutputNames, availableMemoryProportion],
        )  # fmt: skip
        if not 0.0 < proportion <= 1.0:
            # willow/src/builder.cpp, setAvailableMemoryProportion.
            raise popart_exception(
                f"availableMemoryProportion must be in (0,1], got {availableMemoryProportion}"
            )
        self._set_node_attribute(nodeOutputNames, names.AVAILABLE_MEMORY_PROPORTION, proportion)

    def setEnableConvDithering(self, nodeOutputName: Any, enableConvDithering: int) -> None:  # noqa: N802
        # willow/src/builder.cpp, setEnableConvDithering: the original's exact messages.
        if enableConvDithering not in (0, 1):
            raise popart_exception("enableConvDithering must be a bool value")
        op_type = self._find_node(nodeOutputName).op_type
        if op_type != "Conv":
            raise popart_exception(
                "Builder::setEnableConvDithering should only be called on convolutions but "
                f"was given: {op_type}"
            )
        self._set_node_attribute(
            nodeOutputName, names.ENABLE_CONV_DITHERING, int(enableConvDithering)
        )

    def setPartialsType(self, nodeOutputName: Any, partialsType: str) -> None:  # noqa: N802
        if not isinstance(partialsType, str):
            raise incompatible_arguments(
                "setPartialsType",
                [
                    "(self: popart_core._BuilderCore, nodeOutputName: str, "
                    "partialsType: str) -> None"
                ],
                [nodeOutputName, partialsType],
                f"setPartialsType: partialsType must be a str, got {partialsType!r}",
            )
        # willow/src/builder.cpp setPartialsType: only Conv and MatMul take one; the string
        # is kept as given and checked when a session creates the op (partials_types.py).
        op_type = self._find_node(nodeOutputName).op_type
        if op_type not in ("Conv", "MatMul"):
            raise popart_exception(
                "Builder::setPartialsType should only be called on operators: Conv, MatMul; "
                f"but was given: {op_type}"
            )
        self._set_node_attribute(nodeOutputName, names.PARTIALS_TYPE, partialsType)

    def getPartialsType(self, nodeOutputName: Any) -> str:  # noqa: N802
        attribute = _find_attribute(self._find_node(nodeOutputName), names.PARTIALS_TYPE)
        return "FLOAT" if attribute is None else attribute_value(attribute)

    def setSerializeMatMul(  # noqa: N802
        self, nodeOutputName: Any, mode: str, factor: int = 0, keep_precision: bool = False
    ) -> None:
        if mode not in names.SERIALIZE_MATMUL_MODES:
            # willow/include/popart/builder.hpp setSerializeMatMul: the original's words.
            raise popart_exception(
                f"Unsupported mat mul serialization mode '{mode}'. Supported modes are "
                "'input_channels', 'reducing_dim', 'output_channels' or 'none'"
            )
        if mode == "none":
            return
        factor = _converted(
            INT64, factor, "setSerializeMatMul",
            "(self: popart_core._BuilderCore, nodeOutputName: Set[str], mode: str, "
            "factor: int = 0, keep_precision: bool = False) -> None",
            [nodeOutputName, mode, factor, keep_precision],
        )  # fmt: skip
        self._set_node_attribute(nodeOutputName, names.SERIALIZE_MATMUL_MODE, mode)
        self._set_node_attribute(nodeOutputName, names.SERIALIZE_MATMUL_FACTOR, factor)
        self._set_node_attribute(
            nodeOutputName, names.SERIALIZE_MATMUL_PRECISION, int(bool(keep_precision))
        )

    def setInplacePreferences(self, nodeOutputName: Any, prefs: dict[str, float]) -> None:  # noqa: N802
        if not isinstance(prefs, dict):
            # The binding takes a std::map<OpType, float>: pybind11's TypeError (popart.cpp).
            raise incompatible_arguments(
                "setInplacePreferences",
                [
                    "(self: popart_core._BuilderCore, nodeOutputName: str, "
                    "prefs: Dict[str, float]) -> None"
                ],
                [nodeOutputName, prefs],
                f"setInplacePreferences: prefs must be a dict, got {prefs!r}",
            )
        self._set_node_attribute(nodeOutputName, names.INPLACE_OP_NAMES, list(prefs))
        self._set_node_attribute(
            nodeOutputName, names.INPLACE_OP_PRIORITIES, [float(v) for v in prefs.values()]
        )

    def excludePatterns(self, nodeOutputName: Any, patternNames: list[str]) -> None:  # noqa: N802
        self._set_node_attribute(nodeOutputName, names.EXCLUDE_PATTERNS, list(patternNames))

    def recomputeOutputInBackwardPass(  # noqa: N802
        self, nodeOutputNames: Any, value: Any = RecomputeType.Recompute
    ) -> None:
        recompute = coerce_enum(value, RecomputeType, "recomputeOutputInBackwardPass value")
        self._set_node_attribute(nodeOutputNames, names.RECOMPUTE_OUTPUT, int(recompute))

    def getRecomputeOutputInBackwardPass(self, nodeOutputNames: Any) -> bool:  # noqa: N802
        attribute = _find_attribute(self._find_node(nodeOutputNames), names.RECOMPUTE_OUTPUT)
        return attribute is not None and attribute.i == RecomputeType.Recompute

    def checkpointOutput(self, nodeOutputNames: list[str]) -> list[str]:  # noqa: N802
        """Identity copies of the tensors, marked to be kept (not recomputed) for the backward pass."""
        checkpoint = helper.make_attribute(names.RECOMPUTE_OUTPUT, int(RecomputeType.Checkpoint))
        # The original keeps the copies from the patterns that would remove them
        # (willow/src/builder_impl.cpp, checkpointOutput).
        kept = helper.make_attribute(names.EXCLUDE_PATTERNS, ["PreUniRepl", "PostNRepl"])
        return [
            self.add_node("Identity", [tensor_id], attributes=[checkpoint, kept])[0]
            for tensor_id in output_name_set_ordered(nodeOutputNames)
        ]


def _converted(caster: Caster, value: Any, method: str, overload: str, arguments: list) -> Any:
    """`value` as the binding's C++ parameter receives it, or pybind11's TypeError."""
    try:
        return caster.load(value, True, method)
    except Refused as refused:
        raise incompatible_arguments(method, [overload], arguments, str(refused)) from None


# The original's words for each getter's type (willow/src/builder_impl.cpp).
_TYPE_WORDS: dict[int, str] = {
    AttributeProto.INT: "an integer",
    AttributeProto.INTS: "an integer vector",
    AttributeProto.FLOAT: "a float",
    AttributeProto.FLOATS: "a float vector",
    AttributeProto.STRING: "a string",
    AttributeProto.STRINGS: "a string vector",
}


def output_name_set_ordered(node_output_names: Any) -> list[str]:
    if isinstance(node_output_names, str):
        return [node_output_names]
    return list(node_output_names)


def _find_attribute(node: NodeProto, name: str) -> AttributeProto | None:
    return next((attribute for attribute in node.attribute if attribute.name == name), None)
