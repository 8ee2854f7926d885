"""The auto_pipeline functions that compile layers with Poplar and read its reports (PVA):
each raises a clear error, since emulated IPUs write no such report."""

from __future__ import annotations

from openipu._src.errors import unavailable_function

NO_PROFILES = (
    "{name} profiles layers from Poplar's compilation and execution reports (PVA), which "
    "openipu does not produce: emulated IPUs run no Poplar graph, and openipu's cost model "
    "writes its own reports (*.cost.json), not PVA's. The partition search (prediction.partition."
    "get_auto_pipeline_partition_by_cycle_and_transfer) works on a model profile you give it."
)


# Of the original's prediction/partition.py, prediction/partition_evaluate.py, utils/profiler.py.
(
    create_model_profile,
    parse_layer_profile,
    profile_pipelined_model,
    parse_pipelined_model_profile,
    create_strategy,
    profile_layer_from_assignment,
) = (
    unavailable_function(name, NO_PROFILES.format(name=name))
    for name in (
        "create_model_profile",
        "parse_layer_profile",
        "profile_pipelined_model",
        "parse_pipelined_model_profile",
        "create_strategy",
        "profile_layer_from_assignment",
    )
)
