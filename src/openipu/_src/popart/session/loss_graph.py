"""What a training session reads off the model's graph: which tensors the loss depends on
(the weights to train, the tensors that can have gradients), and which batch normalizations
update running statistics that are weights."""

from __future__ import annotations

from collections.abc import Callable

import onnx

from openipu._src.popart.lowering.registry import GRAPHCORE_DOMAIN, ONNX_DOMAIN, canonical_domain


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


def _walk_back(
    graph: onnx.GraphProto, tensor_id: str, passes_through: Callable[[str], bool]
) -> set[str]:
    """`tensor_id` and what it is computed from, not looking past tensors that do not pass."""
    producers = {output: node for node in graph.node for output in node.output if output}
    found = {tensor_id}
    pending = [tensor_id]
    while pending:
        name = pending.pop()
        node = producers.get(name)
        if node is None or not passes_through(name):
            continue
        for used in _names_used(node):
            if used not in found:
                found.add(used)
                pending.append(used)
    return found


def ancestors(graph: onnx.GraphProto, tensor_id: str) -> set[str]:
    """Every tensor `tensor_id` is computed from (itself included)."""
    return _walk_back(graph, tensor_id, lambda name: True)


def gradient_reachable(
    graph: onnx.GraphProto, loss_id: str, carries_gradient: Callable[[str], bool]
) -> set[str]:
    """The tensors PopART's autodiff gives a gradient of `loss_id`.

    Like `ancestors`, but a tensor that carries no gradient (an integer one) stops the walk:
    PopART has no grad op across it (CastOp from an integer type, willow/src/op/cast.cpp).
    Ops whose gradient is zero (Ceil, Floor, Round, ...: OneWayUnaryOp) do not stop it; their
    inputs get zero gradients (willow/src/op/onewayunary.cpp). An ai.graphcore Detach stops it
    too: it has no grad op (willow/src/op/detach.cpp; operators_test/detach_test.py).
    """
    detached = {
        output
        for node in graph.node
        if canonical_domain(node.domain) == GRAPHCORE_DOMAIN and node.op_type == "Detach"
        for output in node.output
    }
    return _walk_back(graph, loss_id, lambda name: name not in detached and carries_gradient(name))


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


def inference_batch_norms_in(graph: onnx.GraphProto, reachable: set[str]) -> list[onnx.NodeProto]:
    """The BatchNormalization nodes with only their Y output (inference mode) that the
    loss's gradient reaches: PopART would create their gradient op, which it refuses
    (willow/src/op/batchnorm.cpp, BatchNormGradOp; operators_test/batchnorm_test.py)."""
    found = []
    for node in graph.node:
        if canonical_domain(node.domain) != ONNX_DOMAIN or node.op_type != "BatchNormalization":
            continue
        if any(a.name == "training_mode" and a.i for a in node.attribute):
            continue
        outputs = [name for name in node.output if name]
        if len(outputs) == 1 and outputs[0] in reachable:
            found.append(node)
    return found


def descendants(graph: onnx.GraphProto, sources: set[str]) -> set[str]:
    """Every tensor computed from one of `sources` (themselves included)."""
    found = set(sources)
    changed = True
    while changed:  # the nodes are topologically sorted, but subgraph uses need a fixpoint
        changed = False
        for node in graph.node:
            if _names_used(node) & found:
                new = {output for output in node.output if output and output not in found}
                if new:
                    found |= new
                    changed = True
    return found


def copy_var_updates(graph: onnx.GraphProto, weight_ids: set[str]) -> dict[str, str]:
    """Weight -> the output of the ai.graphcore CopyVarUpdate that writes it (its first input
    is the weight, its second the new value): the step stores it into the weight, as the
    original's CopyVarUpdateOp does (operators_test/copy_var_update_test.py)."""
    updates = {}
    for node in graph.node:
        if canonical_domain(node.domain) != GRAPHCORE_DOMAIN or node.op_type != "CopyVarUpdate":
            continue
        if len(node.input) == 2 and node.input[0] in weight_ids and node.output:
            updates[node.input[0]] = node.output[0]
    return updates
