"""Layer and pipeline-stage figures read from Poplar's profile reports, opened with Graphcore's
`pva` library (the original's utils/pva_utils.py).

Emulated IPUs write no such report: openipu's cost model writes its own (*.cost.json, see
engine/cost_model/report_schema.py), whose figures are per IPU and per op, not per tile and
program step. These functions read any object shaped as a `pva` report (one opened by
`pva.openReport` from a report written on IPU hardware) and refuse anything else, an openipu
cost report included, with an error saying what they need.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

try:  # Graphcore's report library, where it is installed.
    import pva as _pva

    PType: Any = _pva.Program.Type
except ImportError:

    class PType(enum.Enum):  # type: ignore[no-redef]
        """The program types the readers tell apart (names of `pva.Program.Type`)."""

        DoExchange = enum.auto()
        OnTileExecute = enum.auto()
        GlobalExchange = enum.auto()
        StreamCopyBegin = enum.auto()
        StreamCopyMid = enum.auto()
        StreamCopyEnd = enum.auto()
        Sync = enum.auto()
        Sans = enum.auto()
        SyncAns = enum.auto()


NEEDS_PVA = (
    "{function} reads a Poplar profile report opened with pva.openReport (written when a program "
    "runs on IPU hardware with autoReport enabled), got {kind}. openipu's emulated IPUs write no "
    "Poplar report; its cost model's estimates are in *.cost.json reports (openipu report)."
)
_STREAM_COPIES = ("StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd")


def _compilation(report: Any, function: str) -> Any:
    compilation = getattr(report, "compilation", None)
    if compilation is None:
        raise TypeError(NEEDS_PVA.format(function=function, kind=type(report).__name__))
    return compilation


def _execution_steps(report: Any, function: str) -> list:
    _compilation(report, function)
    return list(report.execution.runs[0].steps)


def _is(program_type: Any, *names: str) -> bool:
    name = getattr(program_type, "name", None) or str(program_type).rsplit(".", 1)[-1]
    return name in names


def _tiles(report: Any, ipu_id: int, function: str) -> Iterable[Any]:
    return _compilation(report, function).ipus[ipu_id].tiles


def _category_total(report: Any, ipu_id: int, category: str, function: str) -> int:
    return sum(
        getattr(tile.memory.category, category).total for tile in _tiles(report, ipu_id, function)
    )


def check_report(report: Any, name: str) -> bool:
    """Whether a program step of the report's liveness belongs to the layer `name`."""
    steps = _compilation(report, "check_report").livenessProgramSteps
    return any(name in step.program.name for step in steps)


def get_vertex_code(report: Any, ipu_id: int = 0) -> int:
    return _category_total(report, ipu_id, "vertexCode", "get_vertex_code")


def get_vertex_instance_state(report: Any, ipu_id: int = 0) -> int:
    return _category_total(report, ipu_id, "vertexInstanceState", "get_vertex_instance_state")


def get_internal_exchange_code(report: Any, ipu_id: int = 0, name: str | None = None) -> int:
    """Internal exchange code on the IPU; with `name` (single-layer reports), that layer's only."""
    function = "get_internal_exchange_code"
    if ipu_id == 0 and name is not None:
        programs = _compilation(report, function).programs
        return sum(
            sum(p.codeBytesByTile) for p in programs if _is(p.type, "DoExchange") and name in p.name
        )
    return _category_total(report, ipu_id, "internalExchangeCode", function)


def get_control_code(report: Any, ipu_id: int = 0, name: str | None = None) -> int:
    """Control code on the IPU; with `name`, the layer's programs' and the syncs' only."""
    if name is None:
        return _category_total(report, ipu_id, "controlCode", "get_control_code")
    programs = _compilation(report, "get_control_code").programs
    return sum(
        sum(p.controlCodeByTile)
        for p in programs
        if name in p.name or _is(p.type, "Sans", "SyncAns")
    )


def get_parameter_from_not_always_alive(report: Any, ipu_id: int = 0) -> int:
    """Not-always-live bytes of the first program step: parameters that the report counts as
    not always live (nothing has been computed yet at that step)."""
    steps = _compilation(report, "get_parameter_from_not_always_alive").livenessProgramSteps
    return steps[0].notAlwaysLiveMemoryForIpu(ipu_id).bytes


def get_max_live_memory(report: Any, ipu_id: int = 0) -> int:
    """The peak not-always-live bytes of the IPU, those parameters left out."""
    steps = _compilation(report, "get_max_live_memory").livenessProgramSteps
    peak = max(step.notAlwaysLiveMemoryForIpu(ipu_id).bytes for step in steps)
    return peak - get_parameter_from_not_always_alive(report, ipu_id)


def get_parameter_from_always_live(report: Any, ipu_id: int = 0, name: str | None = None) -> int:
    """Parameter bytes among the always-live memory of the IPU."""
    function = "get_parameter_from_always_live"
    if ipu_id == 0 and name is not None:
        # A layer's variables have scoped names ("/"); small ones are code and state.
        variables = _compilation(report, function).alwaysLiveVariables
        return sum(v.size for v in variables if "/" in v.name and v.size > 256)
    others = ("vertexCode", "internalExchangeCode", "vertexInstanceState", "controlCode")
    return sum(
        tile.memory.alwaysLiveBytes - sum(getattr(tile.memory.category, c).total for c in others)
        for tile in _tiles(report, ipu_id, function)
    )


def get_total_memory(report: Any, ipu_id: int = 0) -> int:
    return sum(
        tile.memory.total.excludingGaps for tile in _tiles(report, ipu_id, "get_total_memory")
    )


def get_program_step_cycle(step: Any) -> int:
    """Estimated cycles of a compilation program step (its slowest tile)."""
    if _is(step.program.type, "DoExchange"):
        return max(step.program.estimatedCyclesByTile)
    if _is(step.program.type, "OnTileExecute"):
        return max(step.program.computeset.estimatedCyclesByTile)
    return 0


def get_exec_step_cycle(step: Any, ipu_id: int = 0) -> int:
    """Measured cycles of an execution program step on the IPU."""
    if _is(step.program.type, "DoExchange", "OnTileExecute"):
        return step.ipus[ipu_id].cycles
    return 0


def get_layer_cycle(report: Any, name: str, compile_only: bool) -> int:
    """Cycles of the layer `name`: estimated (`compile_only`) or measured in the first run."""
    if compile_only:
        steps = _compilation(report, "get_layer_cycle").livenessProgramSteps
        return sum(get_program_step_cycle(s) for s in steps if name in s.program.name)
    steps = _execution_steps(report, "get_layer_cycle")
    return sum(get_exec_step_cycle(s, 0) for s in steps if name in s.program.name)


def _span(step_ipu: Any) -> int:
    return step_ipu.activeCycles.cyclesTo.max - step_ipu.activeCycles.cyclesFrom.max


def get_pipeline_stage_cycles(report: Any, compute_cycle_only: bool = True) -> list[int]:
    """Cycles of each IPU over one pipeline stage once the pipeline is full: between the
    `n_ipu`-th and the next large (> 1 KiB) global exchange of the first run; with
    `compute_cycle_only`, the exchange, external syncs and stream copies left out."""
    function = "get_pipeline_stage_cycles"
    n_ipu = _compilation(report, function).target.numIPUs
    steps = _execution_steps(report, function)
    exchanges = [
        s
        for s in steps
        if _is(s.program.type, "GlobalExchange")
        and sum(i.dataIn + i.dataOut for i in s.ipus) > 1024
    ]
    start, end = exchanges[n_ipu - 1], exchanges[n_ipu]
    cycles = [
        end.ipus[i].activeCycles.cyclesTo.max - start.ipus[i].activeCycles.cyclesTo.max
        for i in range(n_ipu)
    ]
    if not compute_cycle_only:
        return cycles

    def within_stage(step: Any) -> bool:
        return all(
            c.activeCycles.cyclesFrom.max >= start.ipus[i].activeCycles.cyclesTo.min
            and c.activeCycles.cyclesTo.min <= end.ipus[i].activeCycles.cyclesFrom.max
            for i, c in enumerate(step.ipus)
        )

    transfers = [end] + [
        s
        for s in steps
        if within_stage(s)
        and (
            (_is(s.program.type, "Sync") and s.program.name == "External")
            or _is(s.program.type, *_STREAM_COPIES)
        )
    ]
    for step in transfers:
        for ipu_id, step_ipu in enumerate(step.ipus):
            cycles[ipu_id] -= _span(step_ipu)
    return cycles


def get_single_ipu_cycles(report: Any, compute_cycle_only: bool = True) -> list[int]:
    """Cycles of a single-IPU run from its first to its last stream copy of named data;
    with `compute_cycle_only`, the copies left out."""
    copies = [
        s
        for s in _execution_steps(report, "get_single_ipu_cycles")
        if _is(s.program.type, *_STREAM_COPIES) and s.program.name not in ("", "__seed")
    ]
    first = min(s.ipus[0].activeCycles.cyclesFrom.max for s in copies)
    last = max(s.ipus[0].activeCycles.cyclesTo.max for s in copies)
    total = last - first
    if compute_cycle_only:
        total -= sum(_span(s.ipus[0]) for s in copies)
    return [total]
