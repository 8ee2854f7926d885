"""What a training session reads off the model's graph: which tensors the loss depends on
(the weights to train, the tensors that can have gradients), and which batch normalizations
update running statistics that are weights."""

from __future__ import annotations

import onnx

from openipu._src.popart.lowering.registry import ONNX_DOMAIN, canonical_domain


def _names_used(node: onnx.NodeProto) -> set[str]:
    """A node's inputs, and the outer-scope tensors its subgraphs use."""
    used = {name for name in node.input if name}
    for attribute in node.attribute:
        graphs = list(attribute.graphs)
        if attribute.HasField("g"):
            graphs.append(attribute.g)
        for graph in graphs:
            for inner in graph.node:
                used |= _names_used(inner)
    return used


def ancestors(graph: onnx.GraphProto, tensor_id: str) -> set[str]:
    """Every tensor `tensor_id` is computed from (itself included)."""
    producers: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        for output in node.output:
            if output:
                producers[output] = node
    found = {tensor_id}
    pending = [tensor_id]
    while pending:
        node = producers.get(pending.pop())
        if node is None:
            continue
        for name in _names_used(node):
            if name not in found:
                found.add(name)
                pending.append(name)
    return found


def batch_norm_statistics(graph: onnx.GraphProto, weight_ids: set[str]) -> dict[str, str]:
    """Running mean/variance weight -> the output of its batch normalization that updates it
    in training (ONNX BatchNormalization's outputs 1 and 2 feed inputs 3 and 4)."""
    updates = {}
    for node in graph.node:
        if canonical_domain(node.domain) != ONNX_DOMAIN or node.op_type != "BatchNormalization":
            continue
        for statistic, output in zip(node.input[3:5], node.output[1:3], strict=False):
            if statistic in weight_ids and output:
                updates[statistic] = output
    return updates
