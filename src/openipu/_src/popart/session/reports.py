"""What a session reports about its compiled program (summary, serialized graph, report).

The original reads these from the Poplar engine: memory per tile, cycles, the vertex
graph. Here the memory and cycles are the engine's cost model of the device's chip
(`engine.cost_model`), beside what the emulation knows: the device, the lowered ONNX
graph, how the program was compiled (XLA or a TensorFlow graph) and how many runs it made.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace

import onnx

from openipu._src.engine.cost_model.estimate import CostEstimate
from openipu._src.popart.session.placement import Placement


@dataclass
class ProgramFacts:
    """What the session knows about its program, for the reports."""

    session_name: str
    device: str
    batches_per_step: int
    replication_factor: int
    compile_mode: str = "not compiled yet"
    runs: int = 0
    #: The debug names of the runs since the last reset (`run(stepio, debugName)`).
    run_names: list[str] = field(default_factory=list)
    anchors: dict[str, str] = field(default_factory=dict)  # id -> return type


def summary_report(
    model: onnx.ModelProto, facts: ProgramFacts, estimate: CostEstimate | None = None
) -> str:
    op_counts: dict[str, int] = {}
    for node in model.graph.node:
        key = f"{node.domain or 'ai.onnx'}::{node.op_type}"
        op_counts[key] = op_counts.get(key, 0) + 1
    weights = sum(
        int(onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize) * int(_elements(t.dims))
        for t in model.graph.initializer
    )
    lines = [
        f"Session: {facts.session_name} (emulated IPU; memory and cycles from openipu's cost "
        "model of the chip)",
        f"Device: {facts.device}",
        f"Program: {facts.batches_per_step} batch(es) per step, replication factor "
        f"{facts.replication_factor}, compiled as {facts.compile_mode}",
        f"Runs since the last reset: {facts.runs}",
        f"Graph: {len(model.graph.node)} ops, {len(model.graph.initializer)} initializers "
        f"({weights} bytes)",
    ]
    lines += [f"  {op}: {count}" for op, count in sorted(op_counts.items())]
    lines += ["Anchors:"] + [f"  {name}: {art}" for name, art in facts.anchors.items()]
    if estimate is not None:
        lines += ["Cost model:"] + [f"  {line}" for line in estimate.summary().splitlines()]
    return "\n".join(lines) + "\n"


def serialized_graph(
    model: onnx.ModelProto, facts: ProgramFacts, placement: Placement | None = None
) -> bytes:
    """The model's ops (with, in sharded sessions, each op's virtual graph, pipeline stage and
    the TensorFlow device it ran on) and how the program was compiled, as JSON."""
    graph = {
        "name": facts.session_name,
        "compileMode": facts.compile_mode,
        "inputs": [value.name for value in model.graph.input],
        "outputs": [value.name for value in model.graph.output],
        "ops": [
            {
                "name": node.name,
                "type": node.op_type,
                "domain": node.domain or "ai.onnx",
                "inputs": list(node.input),
                "outputs": list(node.output),
                **(placement.describe(node) if placement is not None else {}),
            }
            for node in model.graph.node
        ],
    }
    if placement is not None:
        # Where the backward pass ran (training): per replica, gradient op -> device.
        devices = placement.gradient_devices
        graph["gradientDevices"] = [devices[replica] for replica in sorted(devices)]
    return json.dumps(graph, indent=1).encode()


class Architecture(enum.Enum):
    """The IPU architectures of a report's target (`pva::IPU::Architecture`)."""

    Ipu1 = "ipu1"
    Ipu2 = "ipu2"
    Ipu21 = "ipu21"


@dataclass(frozen=True)
class Target:
    """What `report.compilation.target` tells of the device a program was compiled for."""

    architecture: Architecture
    numIPUs: int  # noqa: N815 - pva's names
    tilesPerIpu: int  # noqa: N815
    bytesPerTile: int  # noqa: N815

    @property
    def totalMemory(self) -> int:  # noqa: N802
        return self.numIPUs * self.tilesPerIpu * self.bytesPerTile


class Report:
    """Stands in for the PopVision analysis report (`pva::Report`) of the original: the
    summary and graph, the compilation's target (`compilation.target`) and the runs since
    the last reset, by their debug names (`execution.runs[i].name`)."""

    def __init__(
        self,
        summary: str,
        graph_json: bytes,
        target: Target | None = None,
        run_names: Iterable[str] = (),
    ) -> None:
        self.summary = summary
        self.graph = json.loads(graph_json)
        self.compilation = SimpleNamespace(target=target)
        self.execution = SimpleNamespace(runs=[SimpleNamespace(name=n) for n in run_names])

    def __str__(self) -> str:
        return self.summary


def _elements(dims: Iterable[int]) -> int:
    count = 1
    for dim in dims:
        count *= dim
    return count
