"""`Opset`: what every operator set shares — its builder, domain, version and node creation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from onnx import AttributeProto, GraphProto

from openipu._src.popart.builder.core import _BuilderCore
from openipu._src.popart.builder.shape_types import tensor_type_of
from openipu._src.popart.errors import popart_exception


def core_of(builder: Any) -> _BuilderCore:
    """The _BuilderCore behind a Builder (or the core itself)."""
    core = getattr(builder, "_impl", builder)
    if not isinstance(core, _BuilderCore):
        raise popart_exception(f"expected a popart Builder, got {type(builder).__name__}")
    return core


class Opset:
    """Minimal base class for the opsets: `Opset(builder, version)`."""

    domain: ClassVar[str] = ""

    def __init__(self, builder: Any, version: int) -> None:
        self._builder = builder
        self.version = version

    @property
    def _core(self) -> _BuilderCore:
        return core_of(self._builder)

    def _known_shape(self, tensor_id: str) -> list[int] | None:
        """The shape of a graph input, initializer or typed tensor of the builder's graph
        (None when not known without running shape inference)."""
        graph = self._core._graph
        for tensor in graph.initializer:
            if tensor.name == tensor_id:
                return list(tensor.dims)
        for value in (*graph.input, *graph.value_info):
            if value.name == tensor_id:
                found = tensor_type_of(value.type)
                if found is not None and found.shape is not None and None not in found.shape:
                    return [int(d) for d in found.shape]  # type: ignore[arg-type]
        return None

    def _add_node(
        self,
        op_type: str,
        args: Sequence[str],
        attributes: Sequence[AttributeProto] = (),
        num_outputs: int = 1,
        debug_context: Any = "",
    ) -> list[str]:
        return self._core.add_node(
            op_type,
            args,
            domain=self.domain,
            domain_version=self.version,
            attributes=attributes,
            num_outputs=num_outputs,
            debug_context=debug_context,
        )

    def _subgraph(self, subgraph_builder: Any, what: str) -> GraphProto:
        """The graph of a builder made by createSubgraphBuilder() of this model, for an attribute."""
        if subgraph_builder is None:
            raise popart_exception(f"{what}: a subgraph builder is required")
        core = core_of(subgraph_builder)
        if core._parent is None or core._context is not self._core._context:
            raise popart_exception(
                f"{what}: the subgraph must be a builder made by createSubgraphBuilder() "
                "of this model's builder"
            )
        return core.subgraph_proto()

    def _check_num_outputs(self, what: str, num_outputs: int, graph: GraphProto, expected: int):
        if num_outputs != expected:
            raise popart_exception(
                f"{what}: num_outputs is {num_outputs} but subgraph '{graph.name}' with "
                f"{len(graph.output)} output(s) gives {expected}"
            )
