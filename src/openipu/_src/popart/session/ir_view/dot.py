"""The IR's .dot files at the original's checkpoints (willow/src/dotvisualizer.cpp): for
each checkpoint named in `SessionOptions.dotChecks` or in the POPART_DOT_CHECKS environment
variable (names separated by ':', any case, "ALL" for every one), the ops in
[firstDotOp, finalDotOp) are written to `<logDir>/<Checkpoint>_<graph>.dot`, one file per
graph ("r" is the main graph) or one `_all` file when `separateCallOpPdfs` is off."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TextIO

from openipu._src.popart.errors import popart_exception
from openipu._src.popart.session.ir_view.graph import IrGraph, IrOp, IrTensor, shape_text

_ENV = "POPART_DOT_CHECKS"


def requested_checks(options_checks: Iterable[str]) -> set[str]:
    checks = [str(check) for check in options_checks]
    from_env = os.environ.get(_ENV, "")
    if from_env:
        checks.extend(from_env.split(":"))
    return {check.upper() for check in checks}


@dataclass
class DotSettings:
    checks: set[str]
    log_dir: str
    separate_graphs: bool
    first_op: int
    final_op: int
    op_names: bool


@dataclass
class _Files:
    settings: DotSettings
    check: str
    streams: dict[str, TextIO] = field(default_factory=dict)

    def stream(self, graph: str) -> TextIO:
        key = _abridged(graph) if self.settings.separate_graphs else "all"
        if key not in self.streams:
            path = os.path.join(self.settings.log_dir or ".", f"{self.check}_{key}.dot")
            try:
                stream = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            except OSError as error:
                raise popart_exception(f"failed to open file `{path}': {error}") from None
            stream.write('digraph net {\nsize="6,6";\n')
            self.streams[key] = stream
        return self.streams[key]

    def close(self) -> None:
        for stream in self.streams.values():
            stream.write("}\n")
            stream.close()


def _abridged(graph: str) -> str:
    if graph == "":
        return "r"
    match = re.search(r"\((.*?)\)", graph)
    return match.group(1) if match else graph


def write_checkpoint(
    settings: DotSettings,
    check: str,
    graphs: list[IrGraph],
    tensors: dict[str, IrTensor],
    main_graph: IrGraph,
) -> None:
    if "ALL" not in settings.checks and check.upper() not in settings.checks:
        return
    ops = [(graph, op) for graph in graphs for op in graph.ops]
    start, end = max(0, settings.first_op), min(settings.final_op, len(ops))
    if ops and not start < end:
        raise popart_exception(
            f"Invalid dot range ({settings.first_op}, {settings.final_op}) with schedule of "
            f"size {len(ops)}, as no Ops will be exported to the .dot file"
        )
    files = _Files(settings, check)
    ids = {id(op): number for number, (_, op) in enumerate(ops)}
    try:
        for graph, op in ops[start:end]:
            graph_id = "" if graph is main_graph else graph.name
            _write_op(files.stream(graph_id), graph, op, ids, tensors, settings.op_names)
    finally:
        files.close()


def _write_op(
    stream: TextIO,
    graph: IrGraph,
    op: IrOp,
    ids: dict[int, int],
    tensors: dict[str, IrTensor],
    op_names: bool,
) -> None:
    number = ids[id(op)]
    label = f"{op.type} ({number})"
    if op_names:
        label += f" ({number}:{op.name})" if op.name else f" ({number})"
    stream.write(f'n_{number} [shape= "box", label="{label}", color = black];\n')
    producers = graph.producers()
    for tensor in op.inputs.values():
        if tensor not in producers:
            stream.write(f'"t_{tensor}" [shape= "egg", label="{tensor}"];\n')
            stream.write(f'"t_{tensor}" -> n_{number} [color=black, label="{tensor}"];\n')
    for tensor in op.outputs.values():
        info = tensors.get(tensor)
        shape = shape_text(info.shape if info else None)
        consumers = graph.consumers(tensor)
        for consumer in consumers:
            stream.write(
                f'n_{number} -> n_{ids[id(consumer)]} [color=black, label="{tensor}\\n{shape}"];\n'
            )
        if not consumers or tensor in graph.outputs:
            stream.write(f'"t_{tensor}" [shape= "egg", label="{tensor}"];\n')
            stream.write(f'n_{number} -> "t_{tensor}" [color=black, label="{tensor}"];\n')
