"""Debug infos of the IR's ops, as the original records them while
`initializePoplarDebugInfo` streams (layer "popart", with the op's attributes); a Call that
outlining made also names the debug infos of the ops it replaced and of their copies in the
callee (willow/src/transforms/subgraphoutline.cpp, replacedDebugContextIds and
outlinedDebugContextIds)."""

from __future__ import annotations

from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp
from openipu._src.popart.session.ir_view.optimizer import IrTraining
from openipu._src.popart.utility.debug_context import DebugContext, DebugInfo


def _info(op: IrOp, parent: DebugInfo | None = None, op_type: str | None = None) -> DebugInfo:
    context = DebugContext(op.name) if parent is None else DebugContext(parent, op.name)
    info = DebugInfo(context, "popart")
    info.setValue("opid", op_type or op.type)
    info.setValue("attributes", dict(op.attributes))
    return info


def _id_list(ids: list[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"


def record(graphs: list[IrGraph], optimizer: IrTraining | None = None) -> None:
    """`optimizer`: the training session's, whose ops' debug infos are children of a
    "popartbuilder" debug info of the optimizer's debug context made per weight, as is the
    one of the op the optimizer first makes for the weight (its "combo" op)."""
    ids: dict[int, int] = {}
    parents: dict[str, DebugInfo] = {}

    def parent_of(op: IrOp) -> DebugInfo | None:
        if optimizer is None or op.updates is None:
            return None
        if op.updates not in parents:
            parent = DebugInfo(DebugContext(optimizer.debug_context), "popartbuilder")
            parents[op.updates] = parent
            _info(op, parent, optimizer.combo(op.updates))
        return parents[op.updates]

    def info_id(op: IrOp) -> int:
        if id(op) not in ids:
            ids[id(op)] = _info(op, parent_of(op)).getId()
        return ids[id(op)]

    calls: list[tuple[IrOp, DebugInfo]] = []
    for graph in graphs:
        for op in graph.ops:
            if op.replaced:
                calls.append((op, _info(op)))
            else:
                info_id(op)
    for call, info in calls:
        info.setValue("replacedDebugContextIds", _id_list([info_id(o) for o in call.replaced]))
        info.setValue("outlinedDebugContextIds", _id_list([info_id(o) for o in call.outlined]))
