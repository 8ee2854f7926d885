"""Every patch openipu can apply: the families' modules are imported, which registers them."""

from __future__ import annotations

import importlib

from openipu._src.integration.patching import Patch, registered

#: The modules of `openipu._src.integration` that declare patches (a test checks none is missing).
PATCH_FAMILIES = (
    "autograph_bypass",
    "autograph_range_loops",
    "dataset_iterators",
    "eager_collectives",
    "ipu_device_names",
    "keras_api_attribute",
    "keras_data_handler",
    "keras_from_config",
    "keras_input_batch_sizes",
    "keras_input_messages",
    "keras_layer_delegation",
    "keras_loss_scaling",
    "keras_model_new",
    "keras_node_init",
    "region_summaries",
    "replicated_conds",
    "run_errors",
    "saturating_updates",
    "session_run",
    "sharded_gradient_tape",
    "tracing_context",
    "variable_handles",
    "variable_initialized_value",
)


def all_patches() -> list[Patch]:
    """Every patch openipu can apply, whether applied yet or not."""
    for family in PATCH_FAMILIES:
        importlib.import_module(f"openipu._src.integration.{family}")
    return registered()
