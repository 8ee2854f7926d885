"""`auto_pipeline.utils.pva_utils` (re-exports only): figures of Poplar (PVA) reports."""

from openipu._src.addons.auto_pipeline.pva_reports import (
    PType,
    check_report,
    get_control_code,
    get_exec_step_cycle,
    get_internal_exchange_code,
    get_layer_cycle,
    get_max_live_memory,
    get_parameter_from_always_live,
    get_parameter_from_not_always_alive,
    get_pipeline_stage_cycles,
    get_program_step_cycle,
    get_single_ipu_cycles,
    get_total_memory,
    get_vertex_code,
    get_vertex_instance_state,
)

__all__ = [
    "PType",
    "check_report",
    "get_control_code",
    "get_exec_step_cycle",
    "get_internal_exchange_code",
    "get_layer_cycle",
    "get_max_live_memory",
    "get_parameter_from_always_live",
    "get_parameter_from_not_always_alive",
    "get_pipeline_stage_cycles",
    "get_program_step_cycle",
    "get_single_ipu_cycles",
    "get_total_memory",
    "get_vertex_code",
    "get_vertex_instance_state",
]
