"""Host copy ops (`SessionOptions.useHostCopyOps`; willow/src/transforms/hostiosetup.cpp): each
stream input of the main graph is written by an Init op (zeros, `<id>__t<n>`) and a HostLoad
op that loads the stream into it (`<id>__t<n+1>`), which its readers read instead; each
anchor is stored by a HostStore op. Unless batch serialisation, execution phases or explicit
recomputation order them otherwise, they are scheduled with the lowest priority (the
lowest double, which the original prints as `-inf`)."""

from __future__ import annotations

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.session.ir_view.from_onnx import set_recompute
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor

_PLACEMENT = (names.VIRTUAL_GRAPH, names.PIPELINE_STAGE, names.EXECUTION_PHASE)


class _Names:
    def __init__(self) -> None:
        self.counter = 0

    def intermediate(self, base: str) -> str:
        self.counter += 1
        return f"{base}__t{self.counter}"


def _placement(op: IrOp | None) -> dict[str, str]:
    attributes = {} if op is None else {k: v for k, v in op.attributes.items() if k in _PLACEMENT}
    set_recompute(attributes, None)
    return attributes


def insert(
    graph: IrGraph,
    tensors: dict[str, IrTensor],
    streams: list[str],
    anchors: list[str],
    priority: float,
) -> None:
    """`streams` are the main graph's stream inputs, `anchors` its anchored tensors."""
    ids = _Names()
    loads: list[IrOp] = []
    for stream in streams:
        readers = [op for op in graph.ops if stream in op.inputs.values()]
        if not readers:
            continue
        init_id, load_id = ids.intermediate(stream), ids.intermediate(stream)
        info = tensors.get(stream)
        for name in (init_id, load_id):
            if info is not None:
                tensors[name] = IrTensor(name, info.shape, info.data_type)
        placement = _placement(readers[0])
        loads.append(
            IrOp("Init", "", {}, {0: init_id}, dict(placement), schedule_priority=priority)
        )
        loads.append(
            IrOp(
                "HostLoad",
                "",
                {0: init_id},
                {0: load_id},
                dict(placement),
                schedule_priority=priority,
            )
        )
        for op in readers:
            op.inputs = {i: (load_id if t == stream else t) for i, t in op.inputs.items()}
    producers = graph.producers()
    stores = [
        IrOp(
            "HostStore",
            "",
            {0: anchor},
            {},
            _placement(producers.get(anchor)),
            schedule_priority=priority,
        )
        for anchor in anchors
        if anchor in producers
    ]
    graph.ops = [*loads, *graph.ops, *stores]
