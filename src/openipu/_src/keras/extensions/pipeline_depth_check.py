"""The pipeline-depth rule for Keras pipelined models, as the original's compiler applies it.

The original's Keras runs a pipelined model's fit/evaluate/predict as `pipelining_ops.pipeline`
(keras/ipu/extensions/extensions_base.py `_make_pipeline`): training with
`gradient_accumulation_count=gradient_accumulation_steps_per_replica` and an optimizer,
evaluate and predict as inference pipelines of `steps_per_execution` (per replica)
iterations. Keras itself checks nothing more; the Poplar backend refuses, when it compiles
the execution (its first run), an iteration count the pipeline's stages do not fit
(pipeline_visitor.cc, FailedPreconditionError). openipu runs a pipelined model's layers
in order, so it applies the same rule (`pipelining.pipeline_depth`) when it builds the
execution's program.
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.pipelining import pipeline_depth
from openipu._src.pipelining.pipeline_options import PipelineSchedule
from openipu._src.system import configure


def check(model, kind: str, steps: int) -> None:
    """Raises the original's FailedPreconditionError if `model` is pipelined and its
    `kind` ("train", "test", "predict") execution of `steps` steps per replica is refused."""
    records = model._pipeline_records()  # noqa: SLF001
    if records is None:
        return
    training = kind == "train"
    count = model._accumulation_steps() if training else steps  # noqa: SLF001
    if count is None:
        return  # fit refuses a pipelined model without an accumulation count before this
    state = model._ipu  # noqa: SLF001
    # A model may declare stages without layers (`IPUModelState.pipeline_stage_count`).
    stages = state.pipeline_stage_count or max(r.pipeline_stage for r in records) + 1
    mapping = state.pipelining_device_mapping
    mapping = list(mapping[:stages]) if mapping else list(range(stages))
    # pipelining_ops.pipeline's default (Keras refuses batch serialization, which changes it).
    schedule = state.pipelining_kwargs.get("pipeline_schedule") or PipelineSchedule.Grouped
    system = configure.maybe_current_system()
    io_tiles = system is not None and system.config.io_tiles.num_io_tiles > 0
    refused = pipeline_depth.refusal(count, schedule, mapping, training, io_tiles)
    if refused is not None:
        raise tf.errors.FailedPreconditionError(None, None, refused)
