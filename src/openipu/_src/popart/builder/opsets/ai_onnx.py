"""The ai.onnx operator sets, versions 6 to 11: `AiOnnxOpset6` ... `AiOnnxOpset11`.

Like the original, each version's class inherits the previous one and adds or
replaces the operators that changed. Operators with subgraphs (Loop, If,
Scan) and Constant are written by hand; all others come from the ONNX
schemas (see schema_methods).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from onnx import AttributeProto, numpy_helper

from openipu._src.popart.builder.attribute_values import make_typed_attribute
from openipu._src.popart.builder.model_context import AI_ONNX, SUPPORTED_OPSET_VERSIONS
from openipu._src.popart.builder.opsets.base import Opset
from openipu._src.popart.builder.opsets.schema_methods import install_operator_methods
from openipu._src.popart.builder.tensor_info import onnx_type_from_user
from openipu._src.popart.errors import (
    UnsupportedOpsetError,
    incompatible_arguments,
    popart_exception,
)

_HANDWRITTEN = frozenset({"Constant", "Loop", "If", "Scan"})
# PopART takes element types as its own names ("FLOAT16") as well as ONNX numbers.
_COERCIONS = {"to": onnx_type_from_user, "dtype": onnx_type_from_user}


def _ints(name: str, value: Any, what: str) -> AttributeProto:
    return make_typed_attribute(name, value, AttributeProto.INTS, what)


class AiOnnx(Opset):
    """Base class of the ai.onnx operator sets; `AiOnnx(builder, version)` gives that version's set."""

    domain = AI_ONNX
    opset_version: ClassVar[int | None] = None

    if TYPE_CHECKING:
        # The operator methods are installed from the ONNX schemas when this module is
        # imported (install_operator_methods, below).
        def __getattr__(self, name: str) -> Callable[..., Any]: ...

    def __new__(cls, builder: Any = None, version: int | None = None) -> AiOnnx:
        if cls is AiOnnx:
            if version not in OPSET_CLASSES:
                raise UnsupportedOpsetError(
                    f"Unsupported or unrecognized ai.onnx version: {version}; "
                    f"supported versions are {min(OPSET_CLASSES)} to {max(OPSET_CLASSES)}"
                )
            cls = OPSET_CLASSES[version]
        return super().__new__(cls)

    def __str__(self) -> str:
        # The original's Python opset wrapper (python/popart/python_files/builder.py).
        return f"AiOnnx{self.version}"

    def __init__(self, builder: Any, version: int | None = None) -> None:
        version = self.opset_version if version is None else version
        if version is None or version != self.opset_version:
            raise UnsupportedOpsetError(
                f"{type(self).__name__} is ai.onnx version {self.opset_version}, not {version}"
            )
        super().__init__(builder, version)

    def constant(self, value: Any, debugContext: Any = "") -> str:  # noqa: N803
        """Add a Constant node holding `value` (a numpy array); returns its id."""
        if isinstance(value, (str, bytes, dict)) or value is None:
            raise popart_exception(f"Constant: value must be a numpy array, got {value!r}")
        tensor = numpy_helper.from_array(np.asarray(value))
        attribute = make_typed_attribute("value", tensor, AttributeProto.TENSOR, "Constant")
        return self._add_node("Constant", [], [attribute], 1, debugContext)[0]

    def loop(
        self, args: list[str], num_outputs: int, body: Any, debugContext: Any = ""
    ) -> list[str]:  # noqa: N803
        """ONNX Loop. `body` (a subgraph builder) takes (iteration, condition, carried...) and
        returns (condition, carried..., scan outputs...); the Loop returns the last two groups."""
        graph = self._subgraph(body, "Loop")
        if len(graph.input) < 2 or len(args) != len(graph.input):
            raise popart_exception(
                f"Loop: args {list(args)} must match the body's inputs (iteration count, "
                f"condition, carried values...), of which there are {len(graph.input)}"
            )
        self._check_num_outputs("Loop", num_outputs, graph, len(graph.output) - 1)
        attribute = make_typed_attribute("body", graph, AttributeProto.GRAPH, "Loop")
        return self._add_node("Loop", args, [attribute], num_outputs, debugContext)

    def logical_if(
        self, args: list[str], num_outputs: int, else_branch: Any, then_branch: Any, name: Any = ""
    ) -> list[str]:
        """ONNX If: runs `then_branch` when args[0] is true, else `else_branch`."""
        if len(args) != 1:
            raise popart_exception(f"If: args must be [condition], got {list(args)}")
        branches = []
        for attribute_name, branch in (("else_branch", else_branch), ("then_branch", then_branch)):
            graph = self._subgraph(branch, f"If {attribute_name}")
            self._check_num_outputs(f"If {attribute_name}", num_outputs, graph, len(graph.output))
            branches.append(make_typed_attribute(attribute_name, graph, AttributeProto.GRAPH, "If"))
        return self._add_node("If", args, branches, num_outputs, name)

    def _scan(
        self, args: list[str], num_outputs: int, body: Any, attributes: dict[str, Any], debug: Any
    ) -> list[str]:
        graph = self._subgraph(body, "Scan")
        self._check_num_outputs("Scan", num_outputs, graph, len(graph.output))
        onnx_attributes = [
            make_typed_attribute("body", graph, AttributeProto.GRAPH, "Scan"),
            make_typed_attribute(
                "num_scan_inputs", attributes.pop("num_scan_inputs"), AttributeProto.INT, "Scan"
            ),
        ]
        onnx_attributes += [_ints(key, value, "Scan") for key, value in attributes.items() if value]
        return self._add_node("Scan", args, onnx_attributes, num_outputs, debug)


class AiOnnxOpset6(AiOnnx):
    """The ai.onnx operators of opset version 6."""

    opset_version = 6


class AiOnnxOpset7(AiOnnxOpset6):
    """The ai.onnx operators of opset version 7."""

    opset_version = 7


class AiOnnxOpset8(AiOnnxOpset7):
    """The ai.onnx operators of opset version 8."""

    opset_version = 8

    def scan(
        self,
        args: list[str],
        num_outputs: int,
        body: Any,
        num_scan_inputs: int,
        directions: list[int] = [],  # noqa: B006 - the original's signature
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """Scan-8: args are (sequence_lens or "", states..., scan inputs...)."""
        attributes = {"num_scan_inputs": num_scan_inputs, "directions": directions}
        return self._scan(args, num_outputs, body, attributes, debugContext)


class AiOnnxOpset9(AiOnnxOpset8):
    """The ai.onnx operators of opset version 9."""

    opset_version = 9

    def scan(  # type: ignore[override]  # Scan changed its attributes in opset 9
        self,
        args: list[str],
        num_outputs: int,
        body: Any,
        num_scan_inputs: int,
        scan_input_axes: list[int] = [],  # noqa: B006 - the original's signature
        scan_input_directions: list[int] = [],  # noqa: B006
        scan_output_axes: list[int] = [],  # noqa: B006
        scan_output_directions: list[int] = [],  # noqa: B006
        debugContext: Any = "",  # noqa: N803
    ) -> list[str]:
        """Scan-9: args are (states..., scan inputs...)."""
        attributes = {
            "num_scan_inputs": num_scan_inputs,
            "scan_input_axes": scan_input_axes,
            "scan_input_directions": scan_input_directions,
            "scan_output_axes": scan_output_axes,
            "scan_output_directions": scan_output_directions,
        }
        return self._scan(args, num_outputs, body, attributes, debugContext)


class AiOnnxOpset10(AiOnnxOpset9):
    """The ai.onnx operators of opset version 10."""

    opset_version = 10


class AiOnnxOpset11(AiOnnxOpset10):
    """The ai.onnx operators of opset version 11."""

    opset_version = 11

    def constant(  # type: ignore[override]  # Constant-11 may be sparse
        self,
        value: Any,
        is_value_sparse: bool = False,
        debugContext: Any = "",  # noqa: N803
    ) -> str:
        """Constant-11: `is_value_sparse` asks for a sparse_value, which PopART refuses
        (willow/src/builder.gen.cpp, AiOnnxOpset11::constant)."""
        if not isinstance(is_value_sparse, (bool, np.bool_)):
            raise incompatible_arguments(
                "constant",
                [
                    "(self, value: numpy.ndarray, is_value_sparse: bool = False, "
                    "debugContext: DebugContext = '') -> str"
                ],
                [value, is_value_sparse, debugContext],
            )
        if is_value_sparse:
            raise popart_exception(
                "Attributes of type `sparse_tensor' are currently not supported."
            )
        return super().constant(value, debugContext)


OPSET_CLASSES: dict[int, type[AiOnnx]] = {
    cls.opset_version: cls
    for cls in (
        AiOnnxOpset6,
        AiOnnxOpset7,
        AiOnnxOpset8,
        AiOnnxOpset9,
        AiOnnxOpset10,
        AiOnnxOpset11,
    )
}
assert tuple(OPSET_CLASSES) == SUPPORTED_OPSET_VERSIONS[AI_ONNX]

for _version, _opset_class in OPSET_CLASSES.items():
    install_operator_methods(
        _opset_class,
        domain="",
        version=_version,
        previous_version=_version - 1 if _version > 6 else None,
        handwritten=_HANDWRITTEN,
        coercions=_COERCIONS,
    )
