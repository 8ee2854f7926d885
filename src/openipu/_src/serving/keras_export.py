"""Exporting a Keras model for serving (`model.export_for_ipu_serving`): its call as the
predict step, `steps_per_execution` steps per device run (the original's
keras/ipu/extensions/extensions_base.py `_wrap_model_call_for_serving`)."""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tensorflow as tf

from openipu._src.integration import keras_internals
from openipu._src.serving import export, signatures


def input_signature(model: Any, batch_size: int | None) -> list[tf.TensorSpec]:
    """The model's inputs as TensorSpecs, with `batch_size` as their first dimension."""
    if batch_size is not None:
        # The original sets it as a tf.Dimension (keras extensions_base.py
        # _get_input_signature): its TypeError for a non-integer, ValueError below zero.
        batch_size = int(tf.compat.v1.Dimension(batch_size).value)
    specs = []
    for shape, dtype, name in _model_inputs(model):
        if batch_size is not None:
            shape[0] = batch_size
        specs.append(tf.TensorSpec(shape, dtype, name=name))
    if any(None in spec.shape.as_list() for spec in specs):
        raise ValueError(
            "Not all dimensions of inputs can be determined. Please specify batch size in the "
            "model's input layer or specify `batch_size` parameter when exporting model."
        )
    return specs


def _model_inputs(model: Any) -> list[tuple[list[int | None], tf.DType, str]]:
    """(shape, dtype, name) of each of the model's inputs: its input tensors', or a subclassed
    model's `build` shapes (tf_keras 2.21 keeps no call signature for them, while the
    original's Keras did, naming them input_1, input_2, ...)."""
    if getattr(model, "inputs", None):
        return [
            (t.shape.as_list(), t.dtype, re.sub(r"\W", "_", t.name.split(":")[0]))
            for t in model.inputs
        ]
    built = keras_internals.build_input_shape(model) if model.built else None
    if built is None:
        # The original's type and words (keras extensions_base.py _get_call_signature).
        raise RuntimeError(
            "Cannot get model's input signature. Please specify the input shape using "
            "`model.build()` or invoke your model using real data."
        )
    one_shape = isinstance(built, tf.TensorShape) or all(
        isinstance(d, (int, type(None))) for d in built
    )
    shapes = [built] if one_shape else list(built.values() if isinstance(built, dict) else built)
    return [
        (tf.TensorShape(shape).as_list(), model.dtype or tf.float32, f"input_{number}")
        for number, shape in enumerate(shapes, 1)
    ]


def export_model(
    model: Any,
    export_dir: str,
    batch_size: int | None = None,
    output_names: str | list[str] | None = None,
    preprocessing_step: Callable[..., Any] | None = None,
    preprocessing_step_signature: Sequence[tf.TensorSpec] | None = None,
    postprocessing_step: Callable[..., Any] | None = None,
    postprocessing_step_signature: Sequence[tf.TensorSpec] | None = None,
    purge_export_dir: bool = False,
) -> Callable[..., Any]:
    signatures.validate_export_dir(export_dir, purge_export_dir)
    specs = input_signature(model, batch_size)

    stages = _stage_of_layers(model)

    def predict_step(*args: tf.Tensor) -> Any:
        # The model's call runs in its strategy, as the original's predict function does: a
        # subclassed model's PipelineStage scopes may only be entered there.
        with _in_model_strategy(model), _in_stage_scopes(stages):
            return model(list(args) if len(args) > 1 else args[0], training=False)

    # Its parameters are the model's inputs: they name the SavedModel signature's inputs.
    predict_step.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(spec.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for spec in specs]
    )
    steps = keras_internals.steps_per_execution(model)
    iterations = 1 if steps is None else int(steps.numpy())
    return export.export_single_step(
        predict_step,
        export_dir,
        iterations,
        predict_step_signature=specs,
        output_names=output_names,
        preprocessing_step=preprocessing_step,
        preprocessing_step_signature=preprocessing_step_signature,
        postprocessing_step=postprocessing_step,
        postprocessing_step_signature=postprocessing_step_signature,
        purge_export_dir=purge_export_dir,
    )


def _stage_of_layers(model: Any) -> dict[int, tuple[Any, int]]:
    """The pipeline stage of each layer a pipelined model assigns (by the layer's id)."""
    records = model._pipeline_records() if hasattr(model, "_pipeline_records") else None  # noqa: SLF001
    stages: dict[int, tuple[Any, int]] = {}
    for record in records or []:
        if record.pipeline_stage is not None:
            stages.setdefault(id(record.layer), (record.layer, record.pipeline_stage))
    return stages


def _in_model_strategy(model: Any) -> contextlib.AbstractContextManager:
    strategy = getattr(model, "_distribution_strategy", None)
    if strategy is None or tf.distribute.has_strategy():
        return contextlib.nullcontext()
    return strategy.scope()


@contextlib.contextmanager
def _in_stage_scopes(stages: dict[int, tuple[Any, int]]) -> Iterator[None]:
    """While the step is traced, each assigned layer's ops are built in its stage's name
    scope (`pipeline_stage_<k>`): the exported graph keeps the model's stages, as
    export_pipeline's does."""
    wrapped = []
    for layer, stage in stages.values():
        if "call" in vars(layer):
            continue  # a call of the instance's own: left as it is
        call = layer.call

        def in_scope(*args: Any, _call: Any = call, _stage: int = stage, **kwargs: Any) -> Any:
            with tf.name_scope(f"pipeline_stage_{_stage}"):
                return _call(*args, **kwargs)

        # Keras reads the signature of `call` (its `training` argument): keep it.
        in_scope.__signature__ = inspect.signature(call)  # type: ignore[attr-defined]
        layer.call = in_scope
        wrapped.append(layer)
    try:
        yield
    finally:
        for layer in wrapped:
            del layer.call  # the class's own `call` again
