"""Walking a graph together with the subgraphs nested in its nodes' attributes."""

from __future__ import annotations

from collections.abc import Iterator

from onnx import GraphProto, NodeProto


def iter_graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """The graph and every subgraph nested in its nodes' attributes."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from iter_graphs(attribute.g)
            for subgraph in attribute.graphs:
                yield from iter_graphs(subgraph)


def iter_nodes(graph: GraphProto) -> Iterator[NodeProto]:
    """Every node of the graph and of its subgraphs."""
    for each in iter_graphs(graph):
        yield from each.node
