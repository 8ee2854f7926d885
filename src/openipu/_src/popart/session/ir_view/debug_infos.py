"""Debug infos of the IR's ops, as the original records them while
`initializePoplarDebugInfo` streams (layer "popart", with the op's attributes); a Call that
outlining made also names the debug infos of the ops it replaced and of their copies in the
callee (willow/src/transforms/subgraphoutline.cpp, replacedDebugContextIds and
outlinedDebugContextIds)."""

from __future__ import annotations

from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp
from openipu._src.popart.utility.debug_context import DebugContext, DebugInfo


def _info(op: IrOp) -> DebugInfo:
    info = DebugInfo(DebugContext(op.name), "popart")
    info.setValue("opid", op.type)
    info.setValue("attributes", dict(op.attributes))
    return info


def _id_list(ids: list[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"


def record(graphs: list[IrGraph]) -> None:
    ids: dict[int, int] = {}

    def info_id(op: IrOp) -> int:
        if id(op) not in ids:
            ids[id(op)] = _info(op).getId()
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
