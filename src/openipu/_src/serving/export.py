"""`ipu.serving`: export a model as a SavedModel for TensorFlow Serving.

An export writes two things into `export_dir`:

- the SavedModel itself, whose `serving_default` signature runs the optional CPU
  preprocessing, the model's step (a pipeline's stages in order, each its own function)
  and the optional postprocessing, all frozen into plain TensorFlow ops: it loads and
  serves in stock TensorFlow, without openipu;
- in its `assets`, the executable of the device program (the step in a device loop of
  `iterations` steps, as the original compiles it), which the returned function runs
  with the embedded runtime, `iterations` requests per device run.

The flow, argument rules and return value follow the original
(tensorflow/python/ipu/serving.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

from openipu._src.engine import device_loop
from openipu._src.engine.executable import atomic_files, builder, executable_file
from openipu._src.engine.executable.signature import TensorSignature
from openipu._src.engine.outfeed_queue import IPUOutfeedQueue
from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.serving import embedded_runtime, frozen_steps, signatures
from openipu._src.serving.frozen_steps import (
    FrozenStep,
    restore_from_checkpoint,
    run_variable_initializer,
)

_Export_F = TypeVar("_Export_F", bound=Callable[..., Any])


@dataclasses.dataclass
class _Export:
    """What one export writes: the device part (stages) and the CPU steps around it."""

    export_dir: str
    iterations: int
    input_signature: list[tf.TensorSpec]  # the SavedModel's inputs
    stages: list[FrozenStep]  # the device program's steps, in order (one unless pipelined)
    stage_inputs: list[tf.Tensor]  # non-streamed inputs of the first stage (export_pipeline)
    output_names: list[str] | None
    preprocessing: FrozenStep | None
    postprocessing: FrozenStep | None
    metadata: dict[str, Any]


def _output_names(output_names: Any) -> list[str] | None:
    if not output_names:
        return None
    if isinstance(output_names, str):
        return [output_names]
    if not isinstance(output_names, list):
        raise TypeError(
            f"output_names must be either a string or a list, received {type(output_names)}"
        )
    return output_names


def _check_iterations(iterations: Any) -> int:
    """The device loop's trip count: an int, as loops.repeat takes (its TypeError), of at
    least one step (a run of none would never answer a request)."""
    # The original hands it to the loop as its maximum_iterations, which takes any integer
    # (a NumPy integer, an integer scalar tensor) but no float.
    if isinstance(iterations, (tf.Tensor, tf.Variable)) and iterations.dtype.is_integer:
        try:
            value = iterations.numpy()
        except (AttributeError, NotImplementedError, ValueError):
            value = None  # a graph tensor: no value before it runs
        if value is not None and np.ndim(value) == 0:
            iterations = int(value)
    if isinstance(iterations, np.integer):
        iterations = int(iterations)
    if isinstance(iterations, bool) or not isinstance(iterations, int):
        raise TypeError(f"iterations must be a Python int, got {iterations!r}")
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    return iterations


def _match(
    outputs: Sequence[tf.Tensor], expected: Sequence[tf.TensorSpec], source: str, target: str
) -> None:
    """The outputs of one step fit the next step's signature (checked while tracing)."""
    # The original's messages (serving.py validate_io_matching).
    if len(outputs) != len(expected):
        raise ValueError(
            f"The number of the `{source}` outputs does not match the number of "
            f"`tf.TensorSpec` objects in the signature of `{target}`. ({len(outputs)} outputs, "
            f"{len(expected)} specs)"
        )
    for index, (tensor, spec) in enumerate(zip(outputs, expected, strict=True)):
        if tensor.shape != spec.shape or tensor.dtype != spec.dtype:
            raise ValueError(
                f"`{source}` returned Tensor at postion {index} does not match required "
                f"`{target}` TensorSpec.\nTensor shape{tensor.shape}, dtype {tensor.dtype}\n"
                f"Expected TensorSpec shape {spec.shape}, dtype {spec.dtype}\n"
            )


def _named(outputs: list[tf.Tensor], names: list[str] | None) -> Any:
    if names is None:
        return outputs
    if len(outputs) != len(names):
        raise ValueError(
            f"Length of output_names ({len(names)}) does not match the number of results "
            f"returned by the predict function ({len(outputs)})."
        )
    return dict(zip(names, outputs, strict=True))


def _device_program(export: _Export) -> Callable[..., list[tf.Tensor]]:
    """The stages run in order on one element (the first taking the non-streamed inputs)."""

    def run(*values: tf.Tensor) -> list[tf.Tensor]:
        outputs = list(values)
        for index, stage in enumerate(export.stages):
            arguments = [*export.stage_inputs, *outputs] if index == 0 else outputs
            with tf.name_scope(
                f"pipeline_stage_{index}" if len(export.stages) > 1 else "predict_step"
            ):
                outputs = stage(*arguments)
        return outputs

    return run


def _serving_function(
    export: _Export, device_part: Callable[..., list[tf.Tensor]]
) -> Callable[..., Any]:
    """preprocessing -> device part -> postprocessing, outputs named."""
    streamed_signature = [s for s in export.stages[0].signature[len(export.stage_inputs) :]]

    def serve(*args: tf.Tensor) -> Any:
        values = list(args)
        if export.preprocessing is not None:
            values = export.preprocessing(*values)
            _match(values, streamed_signature, "preprocessing_step", "predict_step")
        values = device_part(*values)
        if export.postprocessing is not None:
            expected = export.postprocessing.signature
            if len(values) == len(expected):  # else _match says how many were expected
                values = [
                    tf.ensure_shape(v, s.shape) for v, s in zip(values, expected, strict=True)
                ]
            _match(values, export.postprocessing.signature, "predict_step", "postprocessing_step")
            values = export.postprocessing(*values)
        return _named(values, export.output_names)

    return serve


def _executable(export: _Export, name: str) -> executable_file.Executable:
    """The device program in a device loop over an infeed, compiled as the original does
    (application_compile_op of the loop)."""
    streamed = export.stages[0].signature[len(export.stage_inputs) :]
    dataset = tf.data.Dataset.from_tensors(
        tuple(tf.zeros(s.shape, s.dtype) for s in streamed)
    ).repeat()
    infeed = IPUInfeedQueue(dataset)
    outfeed = IPUOutfeedQueue()
    program = _device_program(export)

    def loop() -> Any:
        return device_loop.repeat(
            export.iterations, lambda *x: outfeed.enqueue(program(*x)), [], infeed
        )

    executable = builder.build(
        loop, [], name, freeze_variables=True, kind="application", metadata=export.metadata
    )
    # Name the streams after the step's parameters and the outputs.
    outputs = executable.signature.streamed_outputs
    output_names = (
        export.output_names
        if export.output_names and len(export.output_names) == len(outputs)
        else None
    )
    signature = dataclasses.replace(
        executable.signature,
        streamed_inputs=tuple(TensorSignature.of(s.name, s) for s in streamed),
        streamed_outputs=tuple(
            dataclasses.replace(o, name=output_names[i]) if output_names else o
            for i, o in enumerate(outputs)
        ),
    )
    return dataclasses.replace(executable, signature=signature)


class _ServingModule(tf.Module):
    """What the SavedModel holds: the serving function and the executable asset."""

    def __init__(
        self, executable_path: str, serve: Callable[..., Any], signature: list[tf.TensorSpec]
    ) -> None:
        super().__init__(name="ipu_serving")
        self.executable = tf.saved_model.Asset(executable_path)
        self.predict = tf.function(serve, input_signature=signature, autograph=False)


def _write(export: _Export) -> Callable[..., Any]:
    unique = uuid.uuid4().hex
    name = f"application_{unique}.popef"  # the original's asset name
    executable = _executable(export, f"serving_{unique}")
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, name)
        executable_file.write(path, executable)
        module = _ServingModule(
            path, _serving_function(export, _device_program(export)), export.input_signature
        )
        with atomic_files.atomic_directory(export.export_dir) as target:
            tf.saved_model.save(
                module,
                target,
                signatures={"serving_default": module.predict.get_concrete_function()},
            )
    return _runtime_function(
        export, os.path.join(export.export_dir, "assets", name), f"engine_{unique}"
    )


def _runtime_function(
    export: _Export, executable_path: str, engine_name: str
) -> Callable[..., Any]:
    """The returned predict function: the exported executable run by the embedded runtime."""

    def device_part(*values: tf.Tensor) -> list[tf.Tensor]:
        context = embedded_runtime.embedded_runtime_start(executable_path, [], engine_name)
        return embedded_runtime.embedded_runtime_call(list(values), context)

    return tf.function(
        _serving_function(export, device_part),
        input_signature=export.input_signature,
        autograph=False,
    )


def _prepare(
    steps: list[FrozenStep],
    variable_initializer: Callable[[Any], Any] | None,
    checkpoint_restore_dir: str | None,
    others: list[FrozenStep | None],
) -> None:
    """Gives the variables their values (initializer, checkpoint), then freezes every step."""
    every = steps + [s for s in others if s is not None]
    if variable_initializer is not None:
        if not callable(variable_initializer):
            raise TypeError(f"variable_initializer must be callable, got {variable_initializer!r}")
        run_variable_initializer(
            variable_initializer, [v for step in every for v in step.variables]
        )
    if checkpoint_restore_dir is not None:
        restore_from_checkpoint(checkpoint_restore_dir, every)
    for step in every:
        step.freeze()


def _signatures(
    predict_step: Callable[..., Any],
    predict_step_signature: Any,
    input_dataset: Any,
    preprocessing_step: Any,
    preprocessing_step_signature: Any,
    postprocessing_step: Any,
    postprocessing_step_signature: Any,
    inputs: Sequence[Any] | None = None,
) -> tuple[list[tf.TensorSpec], list[tf.TensorSpec], FrozenStep | None, FrozenStep | None]:
    """(the SavedModel's inputs, the predict step's, the traced pre- and postprocessing)."""
    signatures.validate_signatures(
        predict_step,
        predict_step_signature,
        input_dataset,
        preprocessing_step,
        preprocessing_step_signature,
        postprocessing_step,
        postprocessing_step_signature,
    )
    preprocessing = postprocessing = None
    if preprocessing_step is not None:
        input_signature = signatures.prepare_input_signature(
            preprocessing_step, preprocessing_step_signature, input_dataset
        )
        step_signature = signatures.prepare_input_signature(
            predict_step, predict_step_signature, non_feed_inputs=inputs, drop_non_feed_inputs=False
        )
        preprocessing = FrozenStep(preprocessing_step, input_signature)
    else:
        step_signature = signatures.prepare_input_signature(
            predict_step,
            predict_step_signature,
            input_dataset,
            non_feed_inputs=inputs,
            drop_non_feed_inputs=False,
        )
        input_signature = step_signature[len(inputs or []) :]
    if postprocessing_step is not None:
        postprocessing = FrozenStep(
            postprocessing_step,
            signatures.prepare_input_signature(postprocessing_step, postprocessing_step_signature),
        )
    return input_signature, step_signature, preprocessing, postprocessing


def _eagerly(export: _Export_F) -> _Export_F:
    """An export runs eagerly, from a TF1 program too: the original's TF1 export builds its
    own graph and session for the step (r1.15 serving.py), whose variables the step creates
    and `variable_initializer` initializes; here they are eager variables, frozen likewise."""

    @functools.wraps(export)
    def run(*args: Any, **kwargs: Any) -> Any:
        if tf.executing_eagerly():
            return export(*args, **kwargs)
        with context.eager_mode(), frozen_steps.for_tf1_program():
            return export(*args, **kwargs)

    return run  # type: ignore[return-value] # the same signature (functools.wraps)


@_eagerly
def export_single_step(
    predict_step: Callable[..., Any],
    export_dir: str,
    iterations: int,
    predict_step_signature: Sequence[tf.TensorSpec] | None = None,
    input_dataset: tf.data.Dataset | None = None,
    variable_initializer: Callable[[Any], Any] | None = None,
    output_names: str | list[str] | None = None,
    preprocessing_step: Callable[..., Any] | None = None,
    preprocessing_step_signature: Sequence[tf.TensorSpec] | None = None,
    postprocessing_step: Callable[..., Any] | None = None,
    postprocessing_step_signature: Sequence[tf.TensorSpec] | None = None,
    purge_export_dir: bool = False,
    checkpoint_restore_dir: str | None = None,
) -> Callable[..., Any]:
    """Writes a SavedModel of `predict_step` (with its executable) to `export_dir`; returns
    the predict function, run by the embedded runtime."""
    signatures.validate_export_dir(export_dir, purge_export_dir)
    if checkpoint_restore_dir is not None:
        signatures.validate_restore_dir(checkpoint_restore_dir, "checkpoint_restore_dir")
    iterations = _check_iterations(iterations)
    names = _output_names(output_names)
    input_signature, step_signature, pre, post = _signatures(
        predict_step,
        predict_step_signature,
        input_dataset,
        preprocessing_step,
        preprocessing_step_signature,
        postprocessing_step,
        postprocessing_step_signature,
    )
    step = FrozenStep(predict_step, step_signature)
    _prepare([step], variable_initializer, checkpoint_restore_dir, [pre, post])
    export = _Export(
        os.fspath(export_dir), iterations, input_signature, [step], [], names, pre, post, {}
    )
    return _write(export)


@_eagerly
def export_pipeline(
    computational_stages: Sequence[Callable[..., Any]],
    export_dir: str,
    iterations: int,
    inputs: Sequence[Any] | None = None,
    device_mapping: Sequence[int] | None = None,
    pipeline_schedule: Any = None,
    poplar_options: Sequence[Any] | None = None,
    name: str | None = None,
    predict_step_signature: Sequence[tf.TensorSpec] | None = None,
    input_dataset: tf.data.Dataset | None = None,
    variable_initializer: Callable[[Any], Any] | None = None,
    output_names: str | list[str] | None = None,
    preprocessing_step: Callable[..., Any] | None = None,
    preprocessing_step_signature: Sequence[tf.TensorSpec] | None = None,
    postprocessing_step: Callable[..., Any] | None = None,
    postprocessing_step_signature: Sequence[tf.TensorSpec] | None = None,
    purge_export_dir: bool = False,
    checkpoint_restore_dir: str | None = None,
) -> Callable[..., Any]:
    """`export_single_step` for a pipeline: its stages run in order, each kept as its own
    function in the SavedModel and recorded (with the device mapping) in the executable."""
    signatures.validate_export_dir(export_dir, purge_export_dir)
    if checkpoint_restore_dir is not None:
        signatures.validate_restore_dir(checkpoint_restore_dir, "checkpoint_restore_dir")
    # The checks and messages of the original's pipeline (pipelining_ops.py pipeline), which
    # its export_pipeline builds.
    if not isinstance(computational_stages, (list, tuple)):
        raise TypeError("computational_stages argument needs to be a list or a tuple.")
    stages_count = len(computational_stages)
    if stages_count < 2:
        raise ValueError("Pipeline requires at least two computational stages.")
    if device_mapping is not None:
        if not isinstance(device_mapping, (list, tuple)):
            raise TypeError("device_mapping argument needs to be a list or a tuple.")
        if len(device_mapping) != stages_count:
            raise ValueError(
                f"Each stage must be mapped to an IPU: {len(device_mapping)} mappings != "
                f"{stages_count} stages"
            )
    if poplar_options is not None:
        option_name = "forward_propagation_stages_poplar_options"
        if not isinstance(poplar_options, (list, tuple)):
            raise TypeError(
                f"{option_name} must be a list or a tuple of PipelineStageOptions objects."
            )
        if len(poplar_options) != stages_count:
            raise ValueError(
                f"{option_name} must be a list or a tuple of PipelineStageOptions objects of "
                f"length {stages_count} (same number as the number of computational stages) "
                f"but is {len(poplar_options)}."
            )
    iterations = _check_iterations(iterations)
    names = _output_names(output_names)
    stage_inputs = [tf.convert_to_tensor(v) for v in (inputs or [])]
    input_signature, step_signature, pre, post = _signatures(
        computational_stages[0],
        predict_step_signature,
        input_dataset,
        preprocessing_step,
        preprocessing_step_signature,
        postprocessing_step,
        postprocessing_step_signature,
        inputs=stage_inputs,
    )
    # Each stage is traced with the outputs of the one before (the original's
    # _freeze_computational_stages), so each needs the one before frozen first.
    stages = []
    signature = step_signature
    for stage_function in computational_stages:
        stage = FrozenStep(stage_function, signature)
        stages.append(stage)
        _prepare([stage], None, None, [])
        signature = stage.output_signature
    _prepare([], variable_initializer, checkpoint_restore_dir, [*stages, pre, post])
    mapping = list(device_mapping) if device_mapping is not None else list(range(stages_count))
    metadata = {
        "pipeline_stages": stages_count,
        "device_mapping": mapping,
        "pipeline_schedule": getattr(pipeline_schedule, "name", None),
        "name": name,
    }
    export = _Export(
        os.fspath(export_dir),
        iterations,
        input_signature,
        stages,
        stage_inputs,
        names,
        pre,
        post,
        metadata,
    )
    return _write(export)


def export_keras(
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
    """Exports a Keras model made in an IPUStrategy scope (`model.export_for_ipu_serving`)."""
    if not hasattr(model, "export_for_ipu_serving"):
        raise ValueError(
            "Provided model was not created inside an IPU strategy, so it does not contain "
            "IPU-specific functions. Please wrap its creation inside an IPU strategy."
        )
    return model.export_for_ipu_serving(
        export_dir,
        batch_size,
        output_names,
        preprocessing_step,
        preprocessing_step_signature,
        postprocessing_step,
        postprocessing_step_signature,
        purge_export_dir,
    )
