"""Where a sharded or pipelined session's ops run: each virtual graph on its own emulated IPU.

PopART puts every op on a virtual graph, one IPU of the replica: the op's
`builder.virtualGraph(k)` with `VirtualGraphMode.Manual`, or PopART's own split with
`VirtualGraphMode.Auto`. Here an op of virtual graph k runs on the host device of the
replica's k-th IPU (`DeviceInfo.host_device_of`; replica r's IPUs are r * n .. r * n + n - 1
for n IPUs per replica). Each placed op is built in a name scope that names its virtual
graph (`shard<k>`). The backward pass of a training session follows: TensorFlow's autodiff
builds the gradient ops of an op in `gradient_tape/<the op's name scope>/`, so they run on
the op's IPU; the few it builds outside any op's scope (the seed of the loss's gradient)
run with the first tensor they read that has a device. Weights and optimizer state (every
replica's copy) stay on the device's first IPU, as in unsharded sessions: ops on other
IPUs read them from there.

Auto mode places the ops as the original's AutoVirtualGraph transform does (its split of
the IR's subgraphs by the bytes of the weights each op reads, in the proportions of
`virtualGraphSplitRatios`; see ir_view/auto_virtual_graph.py); ops the original's IR has
none for run where what they read was made.

Pipeline stages (`builder.pipelineStage`, or the virtual graphs where no op has a stage)
decide, on the chip, which micro-batches overlap: stage s of micro-batch i runs while stage
s + 1 runs micro-batch i - 1. Here the stages of one micro-batch run in order within its
step, so a pipelined model computes exactly what the same model computes unpipelined with
the same accumulation factor (weights are updated once per accumulated batch in both).

Recomputation (`builder.recomputeOutputInBackwardPass`, `SessionOptions.autoRecomputation`)
saves IPU memory by computing activations again in the backward pass: the numbers are the
same, so the annotations and the option are kept (in the model and the options) and
change nothing here.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import onnx
import tensorflow as tf

from openipu._src.engine import replication
from openipu._src.popart.builder import annotation_names
from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.lowering.op import Op
from openipu._src.popart.options.enums import VirtualGraphMode
from openipu._src.popart.options.session_options import SessionOptions

_GRADIENT_SCOPE = "gradient_tape/"
_SHARD_SCOPE = "shard"
# A shard's name scope, as TensorFlow makes it unique: shard1, shard1_1, shard1_2...
_SHARD_NAME = re.compile(r"shard(\d+)(?:_\d+)?")


@dataclass
class Placement:
    """Each placed op's virtual graph and pipeline stage, by the op's first output."""

    virtual_graphs: dict[str, int]
    stages: dict[str, int]
    ipus_per_replica: int
    host_devices: tuple[str, ...]  # the device's IPUs, in order
    # What the traced program used: replica -> op's first output -> TensorFlow device.
    used: dict[int, dict[str, str]] = field(default_factory=dict)
    # Gradient ops placed with their forward op's shard: replica -> name -> device.
    gradient_devices: dict[int, dict[str, str]] = field(default_factory=dict)

    def device_for(self, op: Op) -> str | None:
        """The TensorFlow device of a top-level op in the replica being built."""
        key = _key(op.node)
        graph = self.virtual_graphs.get(key)
        if graph is None:
            return None
        replica = replication.current_replica_index()
        device = self._device(replica, graph)
        self.used.setdefault(replica, {})[key] = device
        return device

    def op_scope(self, op: Op) -> contextlib.AbstractContextManager[object] | None:
        """The lowering's hook: builds a placed op on its device, in a name scope that says
        its virtual graph (`shard<k>`), which its gradient ops' names inherit."""
        device = self.device_for(op)
        if device is None:
            return None
        return _placed(device, f"{_SHARD_SCOPE}{self.virtual_graphs[_key(op.node)]}")

    @contextlib.contextmanager
    def backward(self) -> Iterator[None]:
        """Where the gradient ops built inside run: with the forward ops they differentiate."""
        if tf.executing_eagerly():
            yield
            return
        # Asked here, not in the device function: asking may build ops, which would call it.
        replica = replication.current_replica_index()
        # tf.device takes no functions in TensorFlow 2; the graph being traced does.
        with tf.compat.v1.get_default_graph().device(
            functools.partial(self._backward_device, replica)
        ):
            yield

    def _backward_device(self, replica: int, op: tf.Operation) -> str:
        """A gradient op's device: its forward op's shard's (autodiff builds it in
        `gradient_tape/<the forward op's name scope>/`), else its first placed input's."""
        if op.name.startswith(_GRADIENT_SCOPE):
            for part in reversed(op.name.split("/")[:-1]):
                shard = _SHARD_NAME.fullmatch(part)
                if shard is not None:
                    device = self._device(replica, int(shard[1]))
                    name = op.name[len(_GRADIENT_SCOPE) :]
                    self.gradient_devices.setdefault(replica, {})[name] = device
                    return device
        for tensor in op.inputs:
            if tensor.device:
                input_device: str = tensor.device
                return input_device
        return ""

    def _device(self, replica: int, graph: int) -> str:
        return self.host_devices[replica * self.ipus_per_replica + graph]

    def describe(self, node: onnx.NodeProto) -> dict[str, object]:
        """An op's placement for the session's reports."""
        key = _key(node)
        if key not in self.virtual_graphs:
            return {}
        planned = self.host_devices[self.virtual_graphs[key]]
        return {
            "virtualGraph": self.virtual_graphs[key],
            "pipelineStage": self.stages.get(key, self.virtual_graphs[key]),
            "device": self.used.get(0, {}).get(key, planned),
            # Replicated sessions: where each replica ran it (once the program is traced).
            "replicaDevices": [self.used[r].get(key) for r in sorted(self.used)],
        }


def plan(
    model: onnx.ModelProto,
    options: SessionOptions,
    device: DeviceInfo,
    auto_graphs: Mapping[str, int] | None = None,
) -> Placement | None:
    """The placement of a session's ops, or None when they all run on one IPU; with
    `VirtualGraphMode.Auto`, `auto_graphs` are the virtual graphs of the ops the original's
    split places (by first output; see ir_view/auto_virtual_graph.py)."""
    mode = options.virtualGraphMode
    if mode not in (VirtualGraphMode.Manual, VirtualGraphMode.Auto):
        return None
    ipus_per_replica = max(1, device.numIpus // options.getReplicationFactor())
    nodes = [node for node in model.graph.node if _key(node)]
    graphs: Mapping[str, int | None]
    if mode is VirtualGraphMode.Manual:
        # option_rules checked that every op has a virtual graph below ipus_per_replica.
        graphs = {_key(node): _annotation(node, annotation_names.VIRTUAL_GRAPH) for node in nodes}
        if options.enablePipelining:
            _check_called_graphs(model.graph)
    else:
        graphs = _with_neighbours(nodes, auto_graphs or {})
    stages = {
        _key(node): stage
        for node in nodes
        if (stage := _annotation(node, annotation_names.PIPELINE_STAGE)) is not None
    }
    host_devices = tuple(device.host_device_of(ipu) for ipu in range(device.numIpus))
    return Placement(
        {key: int(graph or 0) for key, graph in graphs.items()},
        stages,
        ipus_per_replica,
        host_devices,
    )


def _check_called_graphs(graph: onnx.GraphProto) -> None:
    """When pipelining, a called subgraph's ops must sit on the calling op's virtual graph
    (operators_test/call_test_ipu_model.py, test_call_pipelined_error)."""
    for call in graph.node:
        if call.op_type != "Call":
            continue
        caller = _annotation(call, annotation_names.VIRTUAL_GRAPH)
        for attribute in call.attribute:
            if attribute.type != onnx.AttributeProto.GRAPH:
                continue
            for node in attribute.g.node:
                own = _annotation(node, annotation_names.VIRTUAL_GRAPH)
                described = (
                    f"Op({node.domain or 'ai.onnx'}.{node.op_type}, "
                    f"outputs=[{', '.join(node.output)}])"
                )
                if own is None:
                    raise popart_exception(
                        f'Op {described} in subgraph "{attribute.g.name}" does not have a '
                        "virtual graph id. When pipelining, subgraph ops must have a virtual "
                        "graph id set."
                    )
                if own != caller:
                    raise popart_exception(
                        f"The virtual graph id {own} for Op {described} in subgraph "
                        f'"{attribute.g.name}" does not match the virtual graph id {caller} of '
                        "the calling op. When pipelining, subgraph ops must have a virtual graph "
                        "id matching the calling op."
                    )


def _with_neighbours(nodes: list[onnx.NodeProto], known: Mapping[str, int]) -> dict[str, int]:
    """`known` completed for the nodes the original's IR has no op for (constants it folded,
    copies its patterns removed): on the virtual graph of what they read, else the first."""
    graphs: dict[str, int] = {}
    made_on: dict[str, int] = {}
    for node in nodes:
        key = _key(node)
        graph = known.get(key)
        if graph is None:
            graph = next((made_on[t] for t in node.input if t in made_on), 0)
        graphs[key] = graph
        made_on.update({output: graph for output in node.output})
    return graphs


@contextlib.contextmanager
def _placed(device: str, scope: str) -> Iterator[None]:
    with tf.device(device), tf.name_scope(scope):
        yield


def _annotation(node: onnx.NodeProto, name: str) -> int | None:
    for attribute in node.attribute:
        if attribute.name == name:
            return int(onnx.helper.get_attribute_value(attribute))
    return None


def _key(node: onnx.NodeProto) -> str:
    return next((name for name in node.output if name), "")
