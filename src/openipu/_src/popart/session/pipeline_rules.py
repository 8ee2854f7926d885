"""The original's rules for a pipelined session, checked when the session is created.

PopART checks the pipeline in the IR (willow/src/ir.cpp `verifyPipelineSettings`,
willow/src/transforms/inferpipelinestages.cpp, willow/src/transforms/pipeline.cpp):

- implicit pipelining needs virtual graphs and more than one IPU per replica;
- either every op has a pipeline stage or none has (then each op's stage is its virtual
  graph's, and no tensor may be consumed in an earlier stage than it is produced), and the
  ops of one stage are on one virtual graph;
- the forward-only program (`createImplicitPipeliningFwdOnlyProgram`) needs implicit
  pipelining with gradient accumulation;
- consecutive stages on the same virtual graph are merged; a training session's backward
  pass adds stages (the loss's stage L is shared, so forward and backward make 2L + 1), and
  the pipeline's depth (the accumulation factor, or the batches of a step without gradient
  accumulation) must be at least the number of stages, to fill and flush it.

The emulation runs the stages of one micro-batch in order (`placement.py`), so none of this
changes the numbers: the rules only refuse what the original refuses, with its words.
"""

from __future__ import annotations

from collections import defaultdict

import onnx

from openipu._src.popart.builder import annotation_names
from openipu._src.popart.dataflow import DataFlow
from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.options.enums import VirtualGraphMode
from openipu._src.popart.options.session_options import SessionOptions
from openipu._src.popart.session.model_ops import annotation as _annotation
from openipu._src.popart.session.model_ops import ir_ops as _ir_ops
from openipu._src.popart.session.model_ops import key as _key
from openipu._src.popart.session.model_ops import op_name as _op_name


def _mode_name(mode: VirtualGraphMode) -> str:
    return f"VirtualGraphMode::{mode.name}"


def implicit_pipelining(options: SessionOptions) -> bool:
    return options.enablePipelining and not (
        options.useHostCopyOps and options.enableExplicitMainLoops
    )


def explicit_pipelining(options: SessionOptions) -> bool:
    return options.enablePipelining and options.useHostCopyOps and options.enableExplicitMainLoops


def check_pipelining(
    options: SessionOptions,
    device: DeviceInfo,
    data_flow: DataFlow,
    model: onnx.ModelProto,
    loss_id: str | None,
) -> None:
    """Every rule on a pipelined session (`loss_id`: a training session's loss)."""
    if options.enablePipelining:
        _check_devices(options, device)
        _check_stage_annotations(model)
    _check_forward_only_program(options)
    if not options.enablePipelining:
        return
    if options.aliasZeroCopy and not options.enableExplicitMainLoops:
        raise popart_exception(
            "SessionOptions.aliasZeroCopy is not supported with implicit pipelining (set "
            "enableExplicitMainLoops, or aliasZeroCopy = False)"
        )
    stages = _stages(options, device, model)
    count = _stage_count(options, model, stages, loss_id)
    if options.enableGradientAccumulation:
        if options.accumulationFactor < count:
            raise popart_exception(
                "For pipelining, depth (gradient accumulation factor) must equal at least the "
                f"number of pipeline stages ({count}) (SessionOptions.accumulationFactor is "
                f"{options.accumulationFactor})"
            )
    elif data_flow.batchesPerStep() < count:
        raise popart_exception(
            "For pipelining, depth (batchesPerStep) must equal at least the number of "
            f"pipeline stages ({count}) (the DataFlow has {data_flow.batchesPerStep()} batches "
            "per step)"
        )


def _check_devices(options: SessionOptions, device: DeviceInfo) -> None:
    replicas = options.getReplicationFactor()
    graphs = device.numIpus // replicas if options.enableReplicatedGraphs else device.numIpus
    mode = options.virtualGraphMode
    if implicit_pipelining(options) and (mode is VirtualGraphMode.Off or graphs == 1):
        raise popart_exception(
            f"Pipelining requires more than 1 IPU (currently {graphs}) and the "
            "'virtualGraphMode' session option to not be VirtualGraphMode::Off (currently "
            f"{_mode_name(mode)})."
        )


def _check_stage_annotations(model: onnx.ModelProto) -> None:
    nodes = _ir_ops(model)
    stages = [_annotation(node, annotation_names.PIPELINE_STAGE) for node in nodes]
    if None in stages and any(stage is not None for stage in stages):
        missing = "".join(
            f"\n  {_op_name(node)}"
            for node, stage in zip(nodes, stages, strict=True)
            if stage is None
        )
        raise popart_exception(
            "Only some ops have had their pipeline stage set. Ops missing the pipeline stage:"
            + missing
        )
    by_stage: dict[int, list[onnx.NodeProto]] = defaultdict(list)
    for node, stage in zip(nodes, stages, strict=True):
        if stage is not None:
            by_stage[stage].append(node)
    for stage, members in sorted(by_stage.items()):
        graphs = {_annotation(node, annotation_names.VIRTUAL_GRAPH) for node in members}
        if len(graphs) > 1:
            names = ", ".join(_op_name(node) for node in members)
            ids = ", ".join(str(-1 if graph is None else graph) for graph in sorted(
                graphs, key=lambda graph: -1 if graph is None else graph
            ))  # fmt: skip
            raise popart_exception(
                f"Ops [{names}] have the same pipeline stage {stage}, but different virtual "
                f"graph ids {{{ids}}}. All ops with the same pipeline stage must also have the "
                "same virtual graph id"
            )


def _check_forward_only_program(options: SessionOptions) -> None:
    if not options.createImplicitPipeliningFwdOnlyProgram:
        return
    start = "Implicit pipelining forward-only program is not supported"
    if explicit_pipelining(options):
        raise popart_exception(f"{start} with explicit pipelining.")
    if not implicit_pipelining(options):
        raise popart_exception(
            f"{start} without implicit pipelining. (Set SessionOptions.enablePipelining.)"
        )
    if not options.enableGradientAccumulation or options.accumulationFactor < 1:
        raise popart_exception(
            f"{start} without gradient accumulation. (Set SessionOptions."
            "enableGradientAccumulation and an accumulationFactor.)"
        )


def _stages(
    options: SessionOptions, device: DeviceInfo, model: onnx.ModelProto
) -> dict[str, tuple[int, int]]:
    """Each op's (pipeline stage, virtual graph), by its first output: its stage, or, when
    no op has one, its virtual graph's (checked: no tensor goes back a stage)."""
    nodes = _ir_ops(model)
    graphs = {_key(node): _annotation(node, annotation_names.VIRTUAL_GRAPH) or 0 for node in nodes}
    stages = {
        _key(node): stage
        for node in nodes
        if (stage := _annotation(node, annotation_names.PIPELINE_STAGE)) is not None
    }
    if stages:
        return {key: (stages[key], graphs[key]) for key in graphs}
    if options.virtualGraphMode is VirtualGraphMode.Auto:
        # Auto virtual graphs: one stage per IPU of the replica.
        ipus = max(1, device.numIpus // options.getReplicationFactor())
        return {str(ipu): (ipu, ipu) for ipu in range(ipus)}
    _check_inferred_order(nodes, graphs)
    return {key: (graph, graph) for key, graph in graphs.items()}


def _check_inferred_order(nodes: list[onnx.NodeProto], graphs: dict[str, int]) -> None:
    """willow/src/transforms/inferpipelinestages.cpp: stages inferred from virtual graphs
    must not send a tensor back to an earlier stage."""
    producers = {output: node for node in nodes for output in node.output if output}
    for consumer in nodes:
        for tensor in consumer.input:
            producer = producers.get(tensor)
            if producer is None:
                continue
            produced, consumed = graphs[_key(producer)], graphs[_key(consumer)]
            if produced > consumed:
                raise popart_exception(
                    f"Tensor {tensor} is consumed in an earlier pipeline stage than it is "
                    f"produced\nProducer {_op_name(producer)} has pipeline stage {produced}"
                    f"\nConsumer {_op_name(consumer)} has pipeline stage {consumed}"
                )


def _stage_count(
    options: SessionOptions,
    model: onnx.ModelProto,
    stages: dict[str, tuple[int, int]],
    loss_id: str | None,
) -> int:
    """The number of pipeline stages once consecutive stages on one virtual graph are
    merged (willow/src/transforms/pipeline.cpp `mergeConsecutivePipelineStages`; not with
    the forward-only program), with a training session's backward stages."""
    forward_only = options.createImplicitPipeliningFwdOnlyProgram
    graph_of_stage = {stage: graph for stage, graph in stages.values()}
    merged, shift, previous = {}, 0, None
    for stage in sorted(graph_of_stage):
        if not forward_only and previous is not None and graph_of_stage[stage] == previous:
            shift += 1
        merged[stage] = stage - shift
        previous = graph_of_stage[stage]
    if loss_id is None:
        return len(set(merged.values()))
    producers = {output: node for node in _ir_ops(model) for output in node.output if output}
    loss_producer = producers.get(loss_id)
    loss_key = _key(loss_producer) if loss_producer is not None else None
    last = max(merged.values(), default=0)
    loss_stage = merged[stages[loss_key][0]] if loss_key in stages else last
    # willow/src/ir.cpp `getMaxPipelineStage`: the backward pass's stages follow the loss's
    # (which the first backward stage shares, unless the forward-only program separates them).
    backward = 2 * loss_stage + (1 if forward_only else 0)
    return max(last, backward) + 1
