"""Off-chip variables (willow/src/transforms/streamingmemoryopinserter.cpp): a weight,
optimizer state or accumulator the tensor location settings keep in streaming memory is
loaded, before its first reader, by a RemoteLoad into a tensor an Init op makes, from its
remote buffer (addressed by `RemoteArg___<id>`), and, when the weight update changed it,
stored back by a RemoteStore after its last writer. The loads and stores per execution
phase are not modelled: each variable is loaded and stored once."""

from __future__ import annotations

from openipu._src.popart import reserved_names
from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.session.ir_view.from_onnx import set_recompute
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor

_PLACEMENT = (names.VIRTUAL_GRAPH, names.PIPELINE_STAGE, names.EXECUTION_PHASE)


def _settings(op: IrOp) -> dict[str, str]:
    attributes = {k: v for k, v in op.attributes.items() if k in _PLACEMENT}
    set_recompute(attributes, "Checkpoint")
    return attributes


def insert(graph: IrGraph, tensors: dict[str, IrTensor], off_chip: set[str]) -> None:
    counter = 0
    for variable in sorted(off_chip):
        readers = [op for op in graph.ops if variable in op.inputs.values()]
        if not readers:
            continue
        counter += 1
        arg = reserved_names.reservedRemoteArgPrefix() + variable
        init_id, loaded = f"{variable}__t_init{counter}", f"{variable}__t_load{counter}"
        info = tensors.get(variable)
        tensors[arg] = IrTensor(arg, (1,), "INT32")
        if info is not None:
            for name in (init_id, loaded):
                tensors[name] = IrTensor(name, info.shape, info.data_type)
        first = readers[0]
        init = IrOp("Init", "", {}, {0: init_id}, _settings(first), is_grad=first.is_grad)
        # The original makes the in-place variant directly (RemoteLoadInplaceOp).
        load = IrOp(
            "RemoteLoadInplace", "", {0: init_id, 1: arg}, {0: loaded}, _settings(first),
            is_grad=first.is_grad,
        )  # fmt: skip
        at = graph.ops.index(first)
        graph.ops[at:at] = [init, load]
        for op in readers:
            op.inputs = {i: (loaded if t == variable else t) for i, t in op.inputs.items()}
        writers = [
            op for op in graph.ops if op.is_grad and loaded in op.inputs.values() and op.outputs
            and op.type.endswith(("VarUpdate", "Accumulate", "AcclUpdate"))
        ]  # fmt: skip
        if writers:
            last = writers[-1]
            store = IrOp(
                "RemoteStore", "", {0: last.outputs[0], 1: arg}, {}, _settings(last),
                is_grad=True,
            )  # fmt: skip
            graph.ops.insert(graph.ops.index(last) + 1, store)
