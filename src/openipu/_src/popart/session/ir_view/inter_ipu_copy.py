"""IPU copies (willow/src/transforms/interipucopy.cpp): a tensor read by an op on another
virtual graph than the one it is made on is copied there by an IpuCopy op, as
`<id>_c<destination IPU>`, which that op (and every other reader on that IPU) reads
instead. A tensor no op makes (a stream input, a weight) is on the virtual graph of its
first reader. The copy is placed on the source's virtual graph and pipeline stage, just
before its first reader."""

from __future__ import annotations

from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.session.ir_view.from_onnx import set_recompute
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor


def ipu_of(op: IrOp) -> str | None:
    return op.attributes.get(names.VIRTUAL_GRAPH)


def insert(graph: IrGraph, tensors: dict[str, IrTensor]) -> None:
    producers = graph.producers()
    home: dict[str, tuple[str | None, str | None]] = {}  # tensor -> (ipu, stage) made on
    copies: dict[tuple[str, str], str] = {}
    ops: list[IrOp] = []
    for op in graph.ops:
        destination = ipu_of(op)
        for index, tensor in sorted(op.inputs.items()):
            producer = producers.get(tensor)
            if producer is not None:
                source = (ipu_of(producer), producer.attributes.get(names.PIPELINE_STAGE))
            else:
                stage = op.attributes.get(names.PIPELINE_STAGE)
                source = home.setdefault(tensor, (destination, stage))
            if destination is None or source[0] is None or source[0] == destination:
                continue
            key = (tensor, destination)
            if key not in copies:
                copied = f"{tensor}_c{destination}"
                copies[key] = copied
                info = tensors.get(tensor)
                if info is not None:
                    tensors[copied] = IrTensor(copied, info.shape, info.data_type)
                attributes = {names.VIRTUAL_GRAPH: source[0]}
                if source[1] is not None:
                    attributes[names.PIPELINE_STAGE] = source[1]
                set_recompute(attributes, "Checkpoint")
                ops.append(
                    IrOp(
                        type="IpuCopy",
                        name="",
                        inputs={0: tensor},
                        outputs={0: copied},
                        attributes=attributes,
                        is_grad=op.is_grad,
                        forward=op.forward,
                    )
                )
            op.inputs[index] = copies[key]
        ops.append(op)
    graph.ops = ops
