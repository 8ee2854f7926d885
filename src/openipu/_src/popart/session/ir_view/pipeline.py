"""Implicit pipelining of a training session's IR (willow/src/transforms/pipeline.cpp):

- stages: ops without a pipeline stage take their virtual graph's
  (willow/src/transforms/inferpipelinestages.cpp); the backward pass runs the forward
  stages in reverse, stage s's grad ops in stage 2N - 1 - s for N forward stages, and every
  op made for the weight update runs with the grad op it follows;
- recomputation (`RecomputationType.Pipeline`): the forward ops of every stage but the last
  are recomputed (`recompute` YES) unless the user checkpointed them; in the last forward
  stage, only the ops before a user's checkpoint are (willow/src/recompute.cpp,
  Pipeline::setFinalFwdStageRecomputation);
- stashes: an activation that a later stage of the backward pass needs (directly, or through
  the recomputation of the ops that read it) is stashed (`Stash`, `Stashed___<id>`) when made
  and restored (`Restore`, `Restored___<id>`) just before the first backward op needing it.
  With full recomputation only a stage's inputs (streams, IPU copies) and the user's
  checkpoints are stashed, the rest being recomputed; consecutive stages on one IPU count as
  one (pipeline_consecutive_stages_test.py).
"""

from __future__ import annotations

from openipu._src.popart import reserved_names
from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.session.ir_view.from_onnx import set_recompute
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor

_STAGE = names.PIPELINE_STAGE


def _stage(op: IrOp) -> int | None:
    value = op.attributes.get(_STAGE)
    return None if value is None else int(value)


def assign_stages(graph: IrGraph) -> None:
    """Pipeline stages for every op of the main graph (forward, backward, weight update)."""
    for op in graph.ops:
        if not op.is_grad and _STAGE not in op.attributes and names.VIRTUAL_GRAPH in op.attributes:
            op.attributes[_STAGE] = op.attributes[names.VIRTUAL_GRAPH]
    forward = [s for op in graph.ops if not op.is_grad and (s := _stage(op)) is not None]
    if not forward:
        return
    count = max(forward) + 1
    for op in graph.ops:
        if op.is_grad and op.forward is not None and _stage(op.forward) is not None:
            op.attributes[_STAGE] = str(2 * count - 1 - int(op.forward.attributes[_STAGE]))


def annotate_recomputation(graph: IrGraph) -> None:
    """`recompute` of the forward ops under RecomputationType.Pipeline."""
    forward = [op for op in graph.ops if not op.is_grad and _stage(op) is not None]
    if not forward:
        return
    last = max(_stage(op) or 0 for op in forward)
    for op in forward:
        if _stage(op) != last and op.attributes.get("recomputetype") == "Undefined":
            set_recompute(op.attributes, "Recompute")
    # The last forward stage: the ops a checkpoint of that stage depends on.
    producers = graph.producers()
    pending = [
        op
        for op in forward
        if _stage(op) == last and op.attributes["recomputetype"] == "Checkpoint"
    ]
    while pending:
        op = pending.pop()
        for tensor in op.inputs.values():
            producer = producers.get(tensor)
            if producer is None or producer.is_grad or _stage(producer) != last:
                continue
            if producer.attributes.get("recomputetype") == "Undefined":
                set_recompute(producer.attributes, "Recompute")
                pending.append(producer)


def _merged_stages(graph: IrGraph) -> dict[int, int]:
    """Each stage's stage once consecutive stages on one IPU are merged."""
    ipu_of: dict[int, str | None] = {}
    for op in graph.ops:
        stage = _stage(op)
        if stage is not None and op.type != "IpuCopy":
            ipu_of.setdefault(stage, op.attributes.get(names.VIRTUAL_GRAPH))
    merged: dict[int, int] = {}
    previous: int | None = None
    for stage in sorted(ipu_of):
        if previous is not None and ipu_of[stage] == ipu_of[previous]:
            merged[stage] = merged[previous]
        else:
            merged[stage] = len(set(merged.values()))
        previous = stage
    return merged


def stash_and_restore(
    graph: IrGraph, tensors: dict[str, IrTensor], fixed: set[str], full_recompute: bool
) -> None:
    """Adds the Stash and Restore ops; `fixed` are the weights and constants (never stashed)."""
    merged = _merged_stages(graph)
    producers = graph.producers()
    forward = [op for op in graph.ops if not op.is_grad and _stage(op) is not None]
    if not merged or not forward:
        return
    # The stage a tensor belongs to: its producer's, or for a stream input or a copy from
    # another IPU, its first reader's (where the original stashes it: getStashReferenceOp).
    made_in: dict[str, int] = {}
    for op in forward:
        for tensor in op.inputs.values():
            producer = producers.get(tensor)
            if producer is None or producer.type == "IpuCopy":
                made_in.setdefault(tensor, int(op.attributes[_STAGE]))
        if op.type != "IpuCopy":
            for tensor in op.outputs.values():
                made_in[tensor] = int(op.attributes[_STAGE])

    def candidate(tensor: str) -> bool:
        if tensor in fixed or tensor not in made_in:
            return False
        producer = producers.get(tensor)
        if not full_recompute or producer is None or producer.type == "IpuCopy":
            return True
        return producer.attributes.get("recomputetype") == "Checkpoint"

    def recomputed_from(tensor: str) -> set[str]:
        """The tensors the recomputation of the backward pass derives from `tensor`."""
        reached = {tensor}
        for op in forward:
            if op.attributes.get("recompute") == "YES" and reached.intersection(op.inputs.values()):
                reached.update(op.outputs.values())
        return reached

    stashes: list[tuple[str, IrOp]] = []
    for tensor in sorted(made_in, key=list(made_in).index):
        if not candidate(tensor):
            continue
        home = merged.get(made_in[tensor])
        derived = recomputed_from(tensor) if full_recompute else {tensor}
        needing = next(
            (
                op
                for op in graph.ops
                if op.is_grad
                and op.type != "IpuCopy"
                and _stage(op) is not None
                and merged.get(_stage(op) or 0) != home
                and derived.intersection(op.inputs.values())
            ),
            None,
        )
        if needing is not None:
            stashes.append((tensor, needing))
    for tensor, needing in stashes:
        _add_stash(graph, tensors, tensor, needing, producers.get(tensor))


def _add_stash(
    graph: IrGraph, tensors: dict[str, IrTensor], tensor: str, needing: IrOp, producer: IrOp | None
) -> None:
    stashed = reserved_names.reservedStashedPrefix() + tensor
    restored = reserved_names.reservedRestoredPrefix() + tensor
    info = tensors.get(tensor)
    if info is not None:
        tensors[stashed] = IrTensor(stashed, info.shape, info.data_type)
        tensors[restored] = IrTensor(restored, info.shape, info.data_type)
    readers = [op for op in graph.ops if not op.is_grad and tensor in op.inputs.values()]
    source = producer if producer is not None else readers[0]
    placement = {k: v for k, v in source.attributes.items() if k in (names.VIRTUAL_GRAPH, _STAGE)}
    stash_attributes = dict(placement)
    set_recompute(stash_attributes, None)
    stash = IrOp("Stash", "", {0: tensor}, {0: stashed}, stash_attributes, is_grad=True)
    restore_attributes = {
        k: v for k, v in needing.attributes.items() if k in (names.VIRTUAL_GRAPH, _STAGE)
    }
    set_recompute(restore_attributes, None)
    restore = IrOp(
        "Restore", "", {0: tensor, 1: stashed}, {0: restored}, restore_attributes, is_grad=True
    )
    after = graph.ops.index(producer) + 1 if producer is not None else graph.ops.index(readers[0])
    graph.ops.insert(after, stash)
    graph.ops.insert(graph.ops.index(needing), restore)
    for op in graph.ops:
        if op.is_grad and op not in (stash, restore) and tensor in op.inputs.values():
            op.inputs = {i: (restored if t == tensor else t) for i, t in op.inputs.items()}
