"""The first API's pipelined models: `ipu.keras.PipelineModel` and `PipelineSequential`.

Their stages come from `ipu.keras.PipelineStage` contexts around layer calls
(`PipelineModel`) or from a list of lists of layers, one list per stage
(`PipelineSequential`); the other arguments are those of
`pipelining_ops.pipeline`. They run on the same engine as the later API's
pipelined models, with the first API's interface (see `models`): a step is one
pipeline execution of `gradient_accumulation_count` batches, gradients are
summed, and the model cannot be called directly or used in a custom loop.
"""

from __future__ import annotations

import tf_keras
from tf_keras.src.engine import functional, sequential

from openipu._src.engine.gradient_accumulation import GradientAccumulationReductionMethod
from openipu._src.keras.api_v1.models import FirstAPIModel, _check_count
from openipu._src.keras.extensions import pipeline_stages
from openipu._src.keras.extensions.model_extensions import KerasExtensions


def _set_pipelining(model, gradient_accumulation_count, device_mapping, pipelining_kwargs) -> None:
    count = _check_count(gradient_accumulation_count, "gradient_accumulation_count")
    model._ipu.first_api_accumulation = count  # noqa: SLF001
    records = pipeline_stages.flatten(model.get_pipeline_stage_assignment())
    declared = model._ipu.pipeline_stage_count  # noqa: SLF001 - PipelineSequential's stages
    if declared is None:
        pipeline_stages.validate(model, records, device_mapping)
    elif device_mapping is not None and len(device_mapping) != declared:
        # pipelining_ops.py:748-751, as `validate` says it.
        raise ValueError(
            f"Each stage must be mapped to an IPU: {len(device_mapping)} mappings != {declared} "
            f"stages (the device_mapping {list(device_mapping)} of model {model.name!r})"
        )
    KerasExtensions.set_pipelining_options(
        model,
        gradient_accumulation_steps_per_replica=count,
        device_mapping=device_mapping,
        gradient_accumulation_reduction_method=GradientAccumulationReductionMethod.SUM,
        **pipelining_kwargs,
    )


class PipelineModel(FirstAPIModel, functional.Functional):
    """A functional model whose layers run as pipeline stages on several IPUs.

    A layer's stage is the `ipu.keras.PipelineStage(i)` context it is called in.
    """

    def __init__(
        self,
        inputs,
        outputs,
        gradient_accumulation_count,
        gradient_accumulation_dtype=None,
        batch_serialization_iterations=1,
        device_mapping=None,
        pipeline_schedule=None,
        recomputation_mode=None,
        forward_propagation_stages_poplar_options=None,
        backward_propagation_stages_poplar_options=None,
        weight_update_poplar_options=None,
        offload_weight_update_variables=None,
        replicated_optimizer_state_sharding=False,
        offload_activations=None,
        offload_gradient_accumulation_buffers=None,
        replicated_weight_sharding=None,
        offload_weights=None,
        layer_replacement=False,
        **kwargs,
    ):
        functional.Functional.__init__(self, inputs=inputs, outputs=outputs, **kwargs)
        self._ipu.layer_replacement = bool(layer_replacement)
        _set_pipelining(
            self,
            gradient_accumulation_count,
            device_mapping,
            _pipelining_kwargs(locals()),
        )


class PipelineSequential(FirstAPIModel, sequential.Sequential):
    """A Sequential model given as a list of stages, each a list of layers."""

    def __init__(
        self,
        stages,
        gradient_accumulation_count,
        gradient_accumulation_dtype=None,
        batch_serialization_iterations=1,
        device_mapping=None,
        pipeline_schedule=None,
        recomputation_mode=None,
        forward_propagation_stages_poplar_options=None,
        backward_propagation_stages_poplar_options=None,
        weight_update_poplar_options=None,
        offload_weight_update_variables=None,
        replicated_optimizer_state_sharding=False,
        offload_activations=None,
        offload_gradient_accumulation_buffers=None,
        replicated_weight_sharding=None,
        offload_weights=None,
        layer_replacement=False,
        name=None,
    ):
        # The original's words (tensorflow/python/ipu/keras/pipeline.py PipelineSequential),
        # which its tests match.
        if not isinstance(stages, (list, tuple)) or not stages:
            raise ValueError(
                "An IPU pipeline must take a non-empty list of stages, where each stage is a "
                "list of Keras Layers."
            )
        assignment = []
        layers = []
        for index, stage in enumerate(stages):
            if not isinstance(stage, (list, tuple)):
                raise ValueError(
                    "An IPU pipeline may only contain lists of stages, where each stage is a "
                    "list of Keras Layers."
                )
            # An empty stage is a stage all the same: the original's stage function applies
            # its (no) layers to its inputs and hands them on (pipeline.py:380-411), it
            # takes an IPU (the shard count is `len(stages)`, pipeline.py:264) and is mapped
            # by `device_mapping`.
            for layer in stage:
                if not isinstance(layer, tf_keras.layers.Layer):
                    raise ValueError(
                        "Each list in the `stages` list must contain only Keras Layers."
                    )
                layers.append(layer)
                if not isinstance(layer, tf_keras.layers.InputLayer):  # not in `model.layers`
                    assignment.append(index)
        sequential.Sequential.__init__(self, layers=None, name=name)
        with self._building():
            for layer in layers:
                self.add(layer)
        self._ipu.layer_replacement = bool(layer_replacement)
        if set(assignment) == set(range(len(stages))):
            KerasExtensions.set_pipeline_stage_assignment(self, assignment)
        else:
            # With empty stages (an input layer alone is one too: it is not in
            # `model.layers`), layers skip stages or the first is not in stage 0, which a
            # Sequential model's assignment may not do: the stages are declared instead.
            self._ipu.pipeline_assignment = [
                pipeline_stages.SequentialLayerPipelineStageAssignment(layer, stage)
                for layer, stage in zip(self.layers, assignment, strict=True)
            ]
            self._ipu.assignment_valid = True
            self._ipu.pipeline_stage_count = len(stages)
            self._reset_execution_functions()
        _set_pipelining(
            self, gradient_accumulation_count, device_mapping, _pipelining_kwargs(locals())
        )

    def add(self, layer):
        with self._building():
            return super().add(layer)

    def build(self, input_shape=None):
        with self._building():
            return super().build(input_shape)


_PIPELINING_ARGUMENTS = (
    "batch_serialization_iterations",
    "pipeline_schedule",
    "recomputation_mode",
    "forward_propagation_stages_poplar_options",
    "backward_propagation_stages_poplar_options",
    "weight_update_poplar_options",
    "offload_weight_update_variables",
    "replicated_optimizer_state_sharding",
    "offload_activations",
    "offload_gradient_accumulation_buffers",
    "replicated_weight_sharding",
    "offload_weights",
    "gradient_accumulation_dtype",
)


def _pipelining_kwargs(arguments: dict) -> dict:
    """The constructor's pipelining arguments that differ from `pipeline`'s defaults."""
    return {
        name: arguments[name]
        for name in _PIPELINING_ARGUMENTS
        if arguments[name] not in (None, False, 1)
    }
