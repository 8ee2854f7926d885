"""Outlining on the IR description (willow/src/transforms/subgraphoutline.cpp, simplified):
a sequence of ops that recurs (same op types, attributes, tensor shapes and wiring) in the
graphs is moved into a new subgraph `call_subgraph(N)` and each occurrence replaced by a Call of
it, when the sequence's value reaches `outlineThreshold` (an op's value is 1000 for the
compute-heavy ops, 0.1 for the others: willow/include/popart/op.hpp).

Limits: the original chooses among overlapping matches with its "rinse" algorithm and
prunes by copy cost; here the most valuable sequence (then the longest) is outlined first,
repeatedly; ops with subgraphs of their own (Call, If, Loop) are not outlined, nor are
graphs of more than 200 ops in all (the search is cubic), nor sequences of more than 40.
"""

from __future__ import annotations

from dataclasses import dataclass

from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor

# Ops whose `getSubgraphValue` is the high one (willow/include/popart/op/*.hpp).
_HIGH_VALUE = frozenset(
    "MatMul Conv ConvTranspose RNN LSTM GRU BatchNormalization GroupNormalization "
    "InstanceNormalization LRN Histogram".split()
)
_HIGH, _LOW = 1000.0, 0.1
_NOT_OUTLINED = frozenset({"Call", "If", "Loop", "Scan"})
# The search is cubic in the number of ops: beyond this many the description is left
# unoutlined, and sequences are at most this long.
_MAX_OPS = 200
_MAX_LENGTH = 40


@dataclass(frozen=True)
class _Instance:
    graph: IrGraph
    start: int
    length: int

    @property
    def ops(self) -> list[IrOp]:
        return self.graph.ops[self.start : self.start + self.length]


def _value(ops: list[IrOp]) -> float:
    return sum(_HIGH if op.type in _HIGH_VALUE else _LOW for op in ops)


def _key(ops: list[IrOp], tensors: dict[str, IrTensor]) -> tuple[object, ...] | None:
    """What makes two sequences the same subgraph: each op's type, attributes and tensor
    types, where each input comes from (an op of the sequence, or which external tensor)."""
    produced: dict[str, tuple[int, int]] = {}
    external: dict[str, int] = {}
    key: list[object] = []
    for position, op in enumerate(ops):
        if op.type in _NOT_OUTLINED:
            return None
        sources: list[object] = []
        for index, name in sorted(op.inputs.items()):
            info = tensors.get(name)
            signature = (info.shape, info.data_type) if info else None
            if name in produced:
                sources.append((index, "op", produced[name], signature))
            else:
                sources.append((index, "in", external.setdefault(name, len(external)), signature))
        outputs = []
        for index, name in sorted(op.outputs.items()):
            produced[name] = (position, index)
            info = tensors.get(name)
            outputs.append((index, (info.shape, info.data_type) if info else None))
        attributes = tuple(sorted(op.attributes.items()))
        key.append((op.type, attributes, tuple(sources), tuple(outputs)))
    return tuple(key)


def _instances(
    graphs: list[IrGraph], length: int, tensors: dict[str, IrTensor]
) -> dict[tuple[object, ...], list[_Instance]]:
    found: dict[tuple[object, ...], list[_Instance]] = {}
    for graph in graphs:
        taken_until: dict[tuple[object, ...], int] = {}
        for start in range(len(graph.ops) - length + 1):
            key = _key(graph.ops[start : start + length], tensors)
            if key is None or start < taken_until.get(key, 0):
                continue  # occurrences of one sequence may not overlap
            found.setdefault(key, []).append(_Instance(graph, start, length))
            taken_until[key] = start + length
    return found


def _best_match(
    graphs: list[IrGraph], tensors: dict[str, IrTensor], threshold: float
) -> list[_Instance] | None:
    longest = max(len(graph.ops) for graph in graphs)
    best: tuple[float, int] | None = None
    chosen = None
    for length in range(1, min(longest, _MAX_LENGTH) + 1):
        for instances in _instances(graphs, length, tensors).values():
            if len(instances) < 2:
                continue
            value = _value(instances[0].ops)
            if value < threshold:
                continue
            score = (value * (len(instances) - 1), length)
            if best is None or score > best:
                best, chosen = score, instances
    return chosen


def _used_outside(instance: _Instance, keep: set[str]) -> set[str]:
    inside = {id(op) for op in instance.ops}
    read_outside = {
        name for op in instance.graph.ops if id(op) not in inside for name in op.inputs.values()
    }
    return read_outside | set(instance.graph.outputs) | keep


def outline(
    graphs: list[IrGraph], tensors: dict[str, IrTensor], threshold: float, keep: set[str]
) -> list[IrGraph]:
    """The graphs with recurring sequences outlined (new subgraphs appended); `keep` are the
    tensors that must stay visible (anchors, the loss)."""
    graphs = list(graphs)
    if sum(len(graph.ops) for graph in graphs) > _MAX_OPS:
        return graphs
    counter = 0
    while True:
        instances = _best_match(graphs, tensors, threshold)
        if instances is None:
            return graphs
        subgraph_id = f"call_subgraph({counter})"
        counter += 1
        positions = _output_positions(instances, keep)
        subgraph = _make_subgraph(subgraph_id, instances[0].ops, positions, tensors)
        graphs.append(subgraph)
        # Replace from the last instance back so that earlier positions stay valid.
        for instance in sorted(instances, key=lambda i: i.start, reverse=True):
            _replace(instance, subgraph, positions)


def _output_positions(instances: list[_Instance], keep: set[str]) -> list[tuple[int, int]]:
    """(op position, output index) of the results some instance needs outside (the union
    over instances, as the original equalizes them)."""
    positions: set[tuple[int, int]] = set()
    for instance in instances:
        outside = _used_outside(instance, keep)
        for position, op in enumerate(instance.ops):
            positions.update((position, i) for i, t in op.outputs.items() if t in outside)
    return sorted(positions)


def _external_inputs(ops: list[IrOp]) -> list[str]:
    produced = {t for op in ops for t in op.outputs.values()}
    inputs: list[str] = []
    for op in ops:
        for _, name in sorted(op.inputs.items()):
            if name not in produced and name not in inputs:
                inputs.append(name)
    return inputs


def _make_subgraph(
    subgraph_id: str,
    model: list[IrOp],
    positions: list[tuple[int, int]],
    tensors: dict[str, IrTensor],
) -> IrGraph:
    inputs = _external_inputs(model)
    renamed = {
        name: f"{subgraph_id}/{name}"
        for op in model
        for name in (*op.inputs.values(), *op.outputs.values())
    }
    for old, new in renamed.items():
        if old in tensors:
            tensors[new] = IrTensor(new, tensors[old].shape, tensors[old].data_type)
    ops = [
        IrOp(
            type=op.type,
            name=op.name,
            inputs={i: renamed[t] for i, t in op.inputs.items()},
            outputs={i: renamed[t] for i, t in op.outputs.items()},
            attributes=dict(op.attributes),
            excluded_patterns=op.excluded_patterns,
            inplace_priorities=op.inplace_priorities,
            # A clone keeps its op's settings, debug info id included, so its debug info
            # has the same parent (willow/src/op.cpp, Op::clone; subgraphoutline.cpp).
            updates=op.updates,
        )
        for op in model
    ]
    outputs = [renamed[model[p].outputs[i]] for p, i in positions]
    return IrGraph(subgraph_id, ops, [renamed[t] for t in inputs], outputs)


def _replace(instance: _Instance, subgraph: IrGraph, positions: list[tuple[int, int]]) -> None:
    ops = instance.ops
    call = IrOp(
        type="Call",
        name="",
        inputs=dict(enumerate(_external_inputs(ops))),
        outputs={n: ops[p].outputs[i] for n, (p, i) in enumerate(positions)},
        # The Call runs where the ops it replaces ran (their virtual graph, pipeline stage
        # and execution phase, which are part of what makes sequences the same).
        attributes={
            **{k: v for k, v in ops[0].attributes.items() if k.startswith("__")},
            "recompute": "NO",
            "recomputetype": "Undefined",
            "callee": subgraph.name,
        },
        replaced=list(ops),
        outlined=list(subgraph.ops),
    )
    instance.graph.ops[instance.start : instance.start + instance.length] = [call]
