"""Rules across session options, the device and the model, checked when a session is created.

Each rule raises a popart_exception that names the options involved, their values and what
would be allowed, with the original's wording where it has one.
"""

from __future__ import annotations

import os

import onnx

from openipu._src.popart.builder import annotation_names
from openipu._src.popart.builder.enums import RecomputeType, ReductionType
from openipu._src.popart.dataflow import DataFlow
from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.options.enums import RecomputationType, VirtualGraphMode
from openipu._src.popart.options.session_options import SessionOptions
from openipu._src.popart.session import pipeline_rules
from openipu._src.popart.session.model_ops import annotation as _annotation
from openipu._src.popart.session.model_ops import debug_name, ir_ops, key
from openipu._src.popart.session.op_versions import check_op_versions
from openipu._src.popart.session.partials_types import check_partials_types


def _check_inference_options(options: SessionOptions) -> None:
    """Options that only a training session can use."""
    if options.enableGradientAccumulation:
        raise popart_exception(
            "Gradient Accumulation only available when training (SessionOptions."
            "enableGradientAccumulation is True in an InferenceSession)"
        )
    if options.automaticLossScalingSettings.enabled:
        # The original's words last (loss_scaling_test.py matches their end).
        raise popart_exception(
            "automaticLossScalingSettings.enabled is True in an InferenceSession. "
            "[AutomaticLossScale transform] Only compatible when doing training"
        )


def _check_accumulation(options: SessionOptions) -> None:
    factor = options.accumulationFactor
    if not options.enableGradientAccumulation and factor != 1:
        # The original's words first (willow/src/sessionoptions.cpp, getAccumulationFactor;
        # gradient_accumulation_test.py matches their start).
        raise popart_exception(
            "enableGradientAccumulation is false, but accumulationFactor > 1. Either enable "
            "gradient accumulation (training only), or set the accumulation factor to 1 "
            f"(SessionOptions.accumulationFactor is {factor}, but enableGradientAccumulation is "
            "False)"
        )
    if factor < 1:
        raise popart_exception(f"SessionOptions.accumulationFactor must be >= 1, got {factor}")


def check_options(
    options: SessionOptions,
    device: DeviceInfo,
    data_flow: DataFlow,
    model: onnx.ModelProto,
    training: bool,
    loss_id: str | None = None,
) -> None:
    """Every rule on the options of a session (`training`: a TrainingSession's, whose loss
    is `loss_id`)."""
    options.validate()
    if not training:
        _check_inference_options(options)
    _check_accumulation(options)
    _check_replication(options, device)
    _check_buffering(options, model, data_flow, training)
    _check_values(options, model)
    _check_virtual_graphs(options, device, model)
    pipeline_rules.check_pipelining(
        options, device, data_flow, model, loss_id if training else None
    )
    if options.strictOpVersions:
        check_op_versions(model)
    if training:
        _check_gradient_reduction(options)
        _check_recomputation(options, model)


def _check_recomputation(options: SessionOptions, model: onnx.ModelProto) -> None:
    """willow/src/ir.cpp: automatic recomputation and ops the user marked for recomputation
    (`builder.recomputeOutputInBackwardPass`) do not mix, unless execution phases decide."""
    if options.autoRecomputation is RecomputationType.NoRecompute:
        return
    if options.executionPhaseSettings.phases >= 2:
        return
    marked = [
        node
        for node in ir_ops(model)
        if _annotation(node, annotation_names.RECOMPUTE_OUTPUT) == RecomputeType.Recompute
    ]
    if marked:
        raise popart_exception("A mixture of auto and manual recomputation is not supported")


def _check_gradient_reduction(options: SessionOptions) -> None:
    """Accumulated and replicated gradients are summed or averaged: every micro-batch and
    replica updates the same weights, so there is nothing to keep them apart in."""
    reduction = options.accumulationAndReplicationReductionType
    several = options.getAccumulationFactor() > 1 or options.getReplicationFactor() > 1
    if several and reduction is ReductionType.NoReduction:
        raise popart_exception(
            "SessionOptions.accumulationAndReplicationReductionType is NoReduction, but the "
            f"gradients of {options.getAccumulationFactor()} micro-batch(es) on "
            f"{options.getReplicationFactor()} replica(s) must be reduced to one update: use "
            "ReductionType.Sum or ReductionType.Mean"
        )


def _check_replication(options: SessionOptions, device: DeviceInfo) -> None:
    # willow/src/ir.cpp: the count is read only with enableReplicatedGraphs (getNumVirtualGraphIds),
    # and a count of 1 is refused only with distributed replicated graphs
    # (verifyDistributedReplicatedGraphSettings); globalReplicationFactor is read only then.
    count = options.replicatedGraphCount
    if options.enableReplicatedGraphs and count < 1:
        raise popart_exception(f"SessionOptions.replicatedGraphCount must be >= 1, got {count}")
    distributed = options.enableDistributedReplicatedGraphs
    if distributed and options.enableReplicatedGraphs and count == 1:
        raise popart_exception(
            "Local replicated graphs enabled but replication factor is 1 (set "
            "SessionOptions.replicatedGraphCount > 1, or enableReplicatedGraphs = False)"
        )
    replicas = options.getReplicationFactor()
    if device.numIpus % replicas:
        raise popart_exception(
            "For replicated graphs, the number of IPUs must be divisible by the replication "
            f"factor: the device has {device.numIpus} IPUs and replicatedGraphCount is {replicas}"
        )
    if distributed and options.globalReplicationFactor < 1:
        raise popart_exception(
            f"SessionOptions.globalReplicationFactor must be > 0, got "
            f"{options.globalReplicationFactor}"
        )
    if options.enableDistributedReplicatedGraphs:
        factor, offset = options.globalReplicationFactor, options.globalReplicaOffset
        if not 0 <= offset <= factor - replicas:
            raise popart_exception(
                f"SessionOptions.globalReplicaOffset is {offset}: it must be in [0, "
                f"globalReplicationFactor - replicatedGraphCount] = [0, {factor - replicas}]"
            )


def _check_buffering(
    options: SessionOptions, model: onnx.ModelProto, data_flow: DataFlow, training: bool
) -> None:
    """willow/src/sessionoptions.cpp, getBufferingDepth, asked for each streamed tensor
    (willow/src/popx/irlowering.cpp): a tensor rearranged on the host has depth 1 unless
    bufferingDepthMap names it; entries for other tensors are never read."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    rearranged = {
        name: options.rearrangeStreamsOnHost
        for name in (tensor.name for tensor in model.graph.input)
        if name not in initializers
    }
    rearranged.update({name: options.rearrangeAnchorsOnHost for name in data_flow.anchors()})
    if training or not options.constantWeights:
        rearranged.update({name: True for name in initializers})  # weights: always
    for name, on_host in rearranged.items():
        depth = options.bufferingDepthMap.get(name, 1 if on_host else options.defaultBufferingDepth)
        if depth < 1:
            raise popart_exception(
                f"Unable to support a buffering depth of {depth} for tensor {name} (minimum "
                "buffering depth is 1)"
            )
        if depth > 1 and on_host:
            raise popart_exception(
                f"Unable to support a buffering depth >1 for tensor {name} because the stream "
                "is set to rearrange on the host (and PopART allows streams that are rearranged "
                "on the host to overlap in memory, making this unsafe)"
            )


def _check_values(options: SessionOptions, model: onnx.ModelProto) -> None:
    check_partials_types(options, model)
    for name in ("serializedPoprithmsAnnealGraphsDir", "serializedPoprithmsShiftGraphsDir"):
        directory = getattr(options, name)
        if directory and not os.path.isdir(directory):
            raise popart_exception(
                f"SessionOptions.{name} is {directory!r}, which is not an existing directory "
                "(PopART does not create it)"
            )
    phases = options.executionPhaseSettings.phases
    if phases > 1 and options.virtualGraphMode is not VirtualGraphMode.ExecutionPhases:
        raise popart_exception(
            f"executionPhaseSettings.phases is {phases}, which needs SessionOptions."
            f"virtualGraphMode = VirtualGraphMode.ExecutionPhases (it is "
            f"{options.virtualGraphMode.name})"
        )
    # A batchSerializationSettings.factor < 2 (negative too) is no batch serialization
    # (willow/src/ir.cpp compares it with 1).


def _check_virtual_graphs(
    options: SessionOptions, device: DeviceInfo, model: onnx.ModelProto
) -> None:
    ipus_per_replica = device.numIpus // options.getReplicationFactor()
    ratios = options.virtualGraphSplitRatios
    if options.virtualGraphMode is VirtualGraphMode.Auto and ratios:
        if len(ratios) != ipus_per_replica:
            raise popart_exception(
                f"SessionOptions.virtualGraphSplitRatios {ratios} has {len(ratios)} ratio(s), "
                f"but Auto virtual graphs split the model over the {ipus_per_replica} IPU(s) of "
                "a replica: give one ratio per IPU (or none, for equal shares)"
            )
        # willow/src/transforms/auto_virtual_graph.cpp: read in Auto mode only.
        for ratio in ratios:
            if not 0 < ratio < 1:
                raise popart_exception(
                    f"SessionOptions.virtualGraphSplitRatios {ratios}: each ratio must be in (0, 1)"
                )
    if options.virtualGraphMode is VirtualGraphMode.Auto and ipus_per_replica > 1:
        # willow/src/transforms/auto_virtual_graph.cpp splits between ops: n ops give at
        # most n - 1 splits, one fewer than the IPUs they must cover.
        splits = len(ir_ops(model)) - 1
        if splits < ipus_per_replica - 1:
            raise popart_exception(
                f"[AutoVirtualGraph] Couldn't find enough splits for {ipus_per_replica} IPUs. "
                f"Only found {max(splits, 0)} (the model has {splits + 1} op(s) to place)"
            )
    if options.virtualGraphMode is not VirtualGraphMode.Manual:
        return
    nodes = ir_ops(model)
    graphs = [_annotation(node, annotation_names.VIRTUAL_GRAPH) for node in nodes]
    if None in graphs and any(graph is not None for graph in graphs):
        # The original's words for a mix (willow/src/ir.cpp, Ir::verifyVirtualGraphIds).
        missing = [
            f"  {node.name or node.output[0]} ({node.op_type})"
            for node, graph in zip(nodes, graphs, strict=True)
            if graph is None
        ]
        raise popart_exception(
            "Either all Ops must have their virtual graph ids set, or none must. "
            "Ops with no virtual graph id:\n" + "\n".join(missing)
        )
    if nodes and all(graph is None for graph in graphs):
        # willow/src/ir.cpp, Ir::verifyVirtualGraphIds.
        raise popart_exception(
            "SessionOptions flag virtualGraphMode is VirtualGraphMode::Manual, but no Ops have "
            "been annotated with virtual graph information. This is an inconsistent "
            "combination. (Annotate every op with builder.virtualGraph(id).)"
        )


def check_virtual_graph_range(
    options: SessionOptions, device: DeviceInfo, model: onnx.ModelProto
) -> None:
    """Every op's virtual graph is an IPU of the replica: the original checks it when it
    lowers the IR for the device, in prepareDevice (willow/src/popx/irlowering.cpp), so a
    session is created with any ids (virtual_graph_check_test.py)."""
    if options.virtualGraphMode is not VirtualGraphMode.Manual:
        return
    ipus_per_replica = device.numIpus // options.getReplicationFactor()
    nodes = ir_ops(model)
    graphs = {key(node): _annotation(node, annotation_names.VIRTUAL_GRAPH) for node in nodes}
    producers = {output: key(node) for node in nodes for output in node.output if output}
    for node in nodes:
        graph = graphs[key(node)]
        if graph is not None and not 0 <= graph < ipus_per_replica:
            # The IR copies the inputs made on other IPUs to this one as `<id>_c<graph>`
            # (willow/src/transforms/interipucopy.cpp), and names the copies.
            inputs = [
                f"{name}_c{graph}"
                if name in producers and graphs[producers[name]] != graph
                else name
                for name in node.input
            ]
            raise popart_exception(
                f"{debug_name(node, model, inputs)} has been assigned to an invalid virtual "
                f"graph {graph}. numIPUs = {ipus_per_replica}. (The device has "
                f"{device.numIpus} IPU(s) and the replication factor is "
                f"{options.getReplicationFactor()}.)"
            )
