"""The partials types of MatMul and Conv ops, checked as PopART checks them when it creates
the ops (the Builder stores any string; a bad one fails when a session is made).

MatMul: its own `__partials_type` attribute, else `SessionOptions.partialsTypeMatMuls`
(willow/src/op/matmul.cpp `fromString`: "float" or "half" in any letter case). Conv: its own
attribute (one string, or one per convolution of a MultiConv), else
`convolutionOptions["partialsType"]` (willow/src/op/convbase.cpp: lower-cased, then "float" or
"half").
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from openipu._src.popart.builder import annotation_names
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.options.session_options import SessionOptions

_SUPPORTED = ("float", "half")
_CONVOLUTIONS = frozenset({("Conv", ""), ("Conv", "ai.onnx"), ("MultiConv", "ai.graphcore")})


def check_partials_types(options: SessionOptions, model: onnx.ModelProto) -> None:
    for node in _nodes(model.graph):
        if node.op_type == "MatMul" and node.domain in ("", "ai.onnx"):
            own = _own_partials(node)
            chosen = own[0] if own else options.partialsTypeMatMuls
            if chosen and chosen.lower() not in _SUPPORTED:
                raise popart_exception(
                    f"Unable to get option 'partialsTypeMatMul' from string '{chosen}'. "
                    "Possible values are 'float' and 'half' in any letter case."
                )
        elif (node.op_type, node.domain) in _CONVOLUTIONS:
            default = options.convolutionOptions.get("partialsType")
            for chosen in _own_partials(node) or ([default] if default is not None else []):
                if chosen.lower() not in _SUPPORTED:
                    raise popart_exception(f"Bad partialsType '{chosen.lower()}'")


def _own_partials(node: onnx.NodeProto) -> list[str]:
    for attribute in node.attribute:
        # The Builder's multiconv keeps its partialsTypes argument as an attribute of that name.
        if attribute.name in (annotation_names.PARTIALS_TYPE, "partialsTypes"):
            if attribute.type == onnx.AttributeProto.STRINGS:
                return [value.decode() for value in attribute.strings]
            return [attribute.s.decode()]
    return []


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of the graph and of the graphs its nodes hold (subgraphs, If branches)."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                yield from _nodes(subgraph)
