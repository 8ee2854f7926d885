"""`VirtualGraphMode.Auto` on the IR description (willow/src/transforms/auto_virtual_graph.cpp):
the forward ops are split into subgraphs (one from each reader of a stream input; an op
reading from two subgraphs starts a new one), each with the points where all its data
flows through one op ("split nodes") and the cumulative cost up to them (the bytes of the
weights and constants an op reads, twice with gradient accumulation); subgraphs are then
placed, in order, on IPU 0, 1..., a subgraph being split at the node nearest the IPU's
share of the total cost (`virtualGraphSplitRatios`, or equal shares). A training session's
op also costs the bytes of the forward tensors its grad ops read (`calcAutoVirtualGraphCost`,
willow/src/op.cpp; the grad ops as `autodiff` describes them)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.session.ir_view.autodiff import forward_reads, grad_op_indices
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor


@dataclass
class _Subgraph:
    candidates: set[int]
    cost: float = 0.0
    splits: list[tuple[float, int]] = field(default_factory=list)  # sorted (cost, op)
    final_splits: set[int] = field(default_factory=set)
    virtual_graph: int = 0
    has_been_split: bool = False

    def best_split(self, split_cost: float) -> int | None:
        at = bisect.bisect_left(self.splits, (split_cost, -1))
        if at == len(self.splits):
            return None
        best = at
        if at > 0 and split_cost - self.splits[at - 1][0] < self.splits[at][0] - split_cost:
            best = at - 1
        return self.splits.pop(best)[1]


def _bytes(tensor: IrTensor | None) -> float:
    if tensor is None or tensor.shape is None:
        return 0.0
    try:
        item = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(
            onnx.TensorProto.DataType.Value(tensor.data_type)
        )).itemsize  # fmt: skip
    except (ValueError, KeyError, TypeError):
        item = 4
    return float(int(np.prod(tensor.shape, dtype=np.int64)) * item)


def assign(
    graph: IrGraph,
    tensors: dict[str, IrTensor],
    streams: Sequence[str],
    fixed: set[str],
    num_ipus: int,
    split_ratios: Sequence[float],
    accumulating: bool,
    training: bool,
) -> None:
    """Sets `__ipu_number` on the forward ops; `fixed` are the weights and constants."""
    ops = [op for op in graph.ops if not op.is_grad]
    if not ops:
        return
    if num_ipus == 1:
        for op in ops:
            op.attributes[names.VIRTUAL_GRAPH] = "0"
        return
    weight_factor = 2.0 if accumulating else 1.0
    index = {id(op): n for n, op in enumerate(ops)}
    subgraphs: list[_Subgraph] = []
    subgraph_of: dict[int, int] = {}

    def start(op_index: int) -> int:
        subgraph_of.setdefault(op_index, len(subgraphs))
        subgraphs.append(_Subgraph({op_index}))
        return subgraph_of[op_index]

    for stream in streams:
        for op in ops:
            if stream in op.inputs.values():
                start(index[id(op)])
    total = 0.0
    for n, op in enumerate(ops):
        cost = _cost(op, tensors, fixed, weight_factor, training)
        total += cost
        sub_id = subgraph_of[n] if n in subgraph_of else start(n)
        subgraph = subgraphs[sub_id]
        subgraph.cost += cost
        if n in subgraph.candidates:
            subgraph.candidates.discard(n)
            if not subgraph.candidates:
                bisect.insort(subgraph.splits, (subgraph.cost, n))
        for out in op.outputs.values():
            for consumer in ops[n + 1 :]:
                if out not in consumer.inputs.values():
                    continue
                c = index[id(consumer)]
                if c not in subgraph_of:
                    subgraph_of[c] = sub_id
                    subgraph.candidates.add(c)
                elif subgraph_of[c] != sub_id:
                    conflict = subgraphs[subgraph_of[c]]
                    if len(conflict.candidates) == 1 and conflict.cost == 0.0:
                        conflict.candidates.discard(c)
                        subgraph.candidates.add(c)
                        subgraph_of[c] = sub_id
                    else:
                        subgraphs.append(_Subgraph({c}))
                        subgraph_of[c] = len(subgraphs) - 1
                else:
                    subgraph.candidates.add(c)
    _place(subgraphs, total, num_ipus, split_ratios)
    for n, op in enumerate(ops):
        subgraph = subgraphs[subgraph_of[n]]
        op.attributes[names.VIRTUAL_GRAPH] = str(subgraph.virtual_graph)
        if n in subgraph.final_splits:
            subgraph.final_splits.discard(n)
            subgraph.virtual_graph += 1


def _cost(
    op: IrOp, tensors: dict[str, IrTensor], fixed: set[str], weight_factor: float, training: bool
) -> float:
    """AutoVirtualGraph::costFn: the weights' bytes (each tensor once), and when training
    the forward tensors the grad ops read (each input and output index once, weights'
    indices excepted)."""
    weights = {t for t in op.inputs.values() if t in fixed}
    total = weight_factor * sum(_bytes(tensors.get(t)) for t in weights)
    if training:
        seen = {("in", i) for i, t in op.inputs.items() if t in fixed}
        for index in grad_op_indices(op):
            for kind, i in forward_reads(op, index):
                if (kind, i) not in seen:
                    seen.add((kind, i))
                    tensor = (op.inputs if kind == "in" else op.outputs)[i]
                    total += _bytes(tensors.get(tensor))
    return total


def _place(
    subgraphs: list[_Subgraph], total: float, num_ipus: int, split_ratios: Sequence[float]
) -> None:
    consumed = 0.0
    ratio_sum = 0.0
    virtual_graph = 0
    sub_id = 0
    for ipu in range(1, num_ipus + 1):
        ratio = ipu / num_ipus
        if split_ratios and ipu - 1 < len(split_ratios):
            ratio = ratio_sum + split_ratios[ipu - 1]
        ratio_sum = ratio
        budget = np.float32(ratio) * np.float32(total)
        while sub_id < len(subgraphs):
            subgraph = subgraphs[sub_id]
            above = subgraph.cost + consumed > budget and subgraph.cost > 0
            split_at_end = subgraph.cost + consumed - budget == 0.0
            if above and ipu != num_ipus:
                split = subgraph.best_split(float(budget) - consumed)
                if split is not None:
                    subgraph.final_splits.add(split)
                    if not subgraph.has_been_split:
                        subgraph.virtual_graph = virtual_graph
                    subgraph.has_been_split = True
                    virtual_graph += 1
                    break
                split_at_end = True
            consumed += subgraph.cost
            sub_id += 1
            if not subgraph.has_been_split:
                subgraph.virtual_graph = virtual_graph
            if split_at_end and ipu != num_ipus and sub_id != len(subgraphs):
                virtual_graph += 1
                break
