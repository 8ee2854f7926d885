"""`pipelining_ops.pipeline`: computational stages over several IPUs, as a device loop.

What a pipeline computes, for every schedule (the fact sheet's CPU reference):

    for r in range(repeat_count):
        for g in range(gradient_accumulation_count):
            element = next(infeed)
            outputs = stage_n(...stage_1(stage_0(*inputs, *element)))
            if training: accumulate the gradients of the optimizer function's loss
            enqueue the last stage's outputs (or the loss) to the outfeed
        if training: apply the accumulated gradients once

All the mini-batches of one repeat use the same weights. It is built as two
nested device loops in one compiled region: the infeed's
repeat_count x gradient_accumulation_count elements are fetched by the host
before the region, and each repeat's slice feeds its inner loop. Each stage's
operations are placed on the host device of its IPU (`device_mapping`).
Schedules, recomputation, offloading and per-stage Poplar options change
memory and speed on a real IPU, not the numbers: they are validated and kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import numbers
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

from openipu._src.eager.backprop import GradientCaptureContext, GradientCaptureTape
from openipu._src.engine import (
    deferred_builds,
    device_loop,
    device_scope,
    ipu_placement,
    replication,
)
from openipu._src.engine import region as region_lib
from openipu._src.engine.executable import stream_capture
from openipu._src.engine.gradient_accumulation import (
    AccumulatorDType,
    AccumulatorStore,
    GradientAccumulation,
    GradientAccumulationReductionMethod,
    LastCapturedGradients,
    split_tagged,
    tagged_pairs,
)
from openipu._src.engine.outfeed_queue import IPUOutfeedMode, IPUOutfeedQueue
from openipu._src.engine.replicas import lockstep, replicated
from openipu._src.engine.value_types import Nested
from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.optimizers.ipu_optimizer import Optimizer
from openipu._src.pipelining import (
    captured_gradients,
    parallel_stages,
    pipeline_depth,
    pipeline_options,
)
from openipu._src.pipelining.optimizer_hyperparameters import KeptHyperparameters
from openipu._src.pipelining.parallel_stages import IpuMapping, ParallelStage
from openipu._src.pipelining.pipeline_options import (
    PipelineSchedule,
    PipelineStageOptions,
    RecomputationMode,
)
from openipu._src.pipelining.stage_captures import CaptureCheck
from openipu._src.system import configure

#: The type `accumulate_outfeed` sums in: None (the data's), a DType, or a callable from
#: the data's DType.
OutfeedDType: TypeAlias = "tf.DType | Callable[[tf.DType], tf.DType] | None"

# `functools.reduce` is reachable as `pipelining_ops.reduce` in the original (a doc artifact).
reduce = functools.reduce

__all__ = [
    "OptimizerFunctionOutput",
    "PipelineSchedule",
    "PipelineStageOptions",
    "RecomputationMode",
    "pipeline",
    "recomputation_checkpoint",
    "reduce",
]


class OptimizerFunctionOutput:
    """What a pipeline's `optimizer_function` returns: the optimizer and the loss to minimise.

    With a Keras (OptimizerV2) optimizer, the gradients are taken for `variables`, or for
    the variables `tape` watched, as in the original (ipu/ops/pipelining_ops.py); without
    either, the pipeline raises its RuntimeError. The arguments are
    checked as the original's property setters check them, in the same order.
    """

    def __init__(
        self,
        opt: Optimizer,
        loss: tf.Tensor,
        compute_gradients_args: tuple[object, ...] | None = None,
        compute_gradients_kwargs: dict[str, object] | None = None,
        apply_gradients_args: tuple[object, ...] | None = None,
        apply_gradients_kwargs: dict[str, object] | None = None,
        variables: Sequence[tf.Variable] | None = None,
        tape: tf.GradientTape | None = None,
        gradient_capture_context: GradientCaptureContext | None = None,
        captured_gradient_outfeed: IPUOutfeedQueue | None = None,
    ) -> None:
        # Set through the properties below, in the original's order (its setters,
        # ops/pipelining_ops.py:160-172): a falsy value gives the default.
        self.opt = opt
        self.loss = loss
        self.compute_gradients_args = compute_gradients_args if compute_gradients_args else ()
        self.compute_gradients_kwargs = compute_gradients_kwargs if compute_gradients_kwargs else {}
        self.apply_gradients_args = apply_gradients_args if apply_gradients_args else ()
        self.apply_gradients_kwargs = apply_gradients_kwargs if apply_gradients_kwargs else {}
        self._tape: tf.GradientTape | None = None
        self._gradient_capture_context: GradientCaptureContext | None = None
        self.variables = variables if variables else ()
        self.tape = tape
        self.gradient_capture_context = gradient_capture_context
        self.captured_gradient_outfeed = captured_gradient_outfeed

    @property
    def _keras(self) -> bool:
        return not isinstance(self.opt, tf.compat.v1.train.Optimizer)

    @property
    def opt(self) -> Optimizer:
        return self._opt

    @opt.setter
    def opt(self, value: Optimizer) -> None:
        if not _is_optimizer(value):
            raise TypeError(
                "OptimizerFunctionOutput.opt must be a TensorFlow Optimizer or Keras "
                f"OptimizerV2 object: opt must be an optimizer, got {type(value).__name__}"
            )
        self._opt = value

    @property
    def loss(self) -> tf.Tensor:
        return self._loss

    @loss.setter
    def loss(self, value: tf.Tensor) -> None:
        if not isinstance(value, (tf.Tensor, tf.Variable)):
            raise TypeError(
                "OptimizerFunctionOutput.loss must be a TensorFlow Tensor object: "
                f"loss must be a tensor, got {type(value).__name__}"
            )
        self._loss = value

    # The original's setters (ops/pipelining_ops.py:198-250): the arguments must be a
    # tuple and the keyword arguments a dict (TypeError, a list too); a Keras optimizer
    # takes no compute_gradients arguments (ValueError).

    @property
    def compute_gradients_args(self) -> tuple[object, ...]:
        return self._compute_gradients_args

    @compute_gradients_args.setter
    def compute_gradients_args(self, value: tuple[object, ...]) -> None:
        if not isinstance(value, tuple):
            raise TypeError("OptimizerFunctionOutput.compute_gradients_args must be a tuple.")
        self._no_keras_compute_gradients("compute_gradients_args", value)
        self._compute_gradients_args = value

    @property
    def compute_gradients_kwargs(self) -> dict[str, object]:
        return self._compute_gradients_kwargs

    @compute_gradients_kwargs.setter
    def compute_gradients_kwargs(self, value: dict[str, object]) -> None:
        if not isinstance(value, dict):
            raise TypeError("OptimizerFunctionOutput.compute_gradients_kwargs must be a dict.")
        self._no_keras_compute_gradients("compute_gradients_kwargs", value)
        self._compute_gradients_kwargs = value

    @property
    def apply_gradients_args(self) -> tuple[object, ...]:
        return self._apply_gradients_args

    @apply_gradients_args.setter
    def apply_gradients_args(self, value: tuple[object, ...]) -> None:
        if not isinstance(value, tuple):
            raise TypeError("OptimizerFunctionOutput.apply_gradients_args must be a tuple.")
        self._apply_gradients_args = value

    @property
    def apply_gradients_kwargs(self) -> dict[str, object]:
        return self._apply_gradients_kwargs

    @apply_gradients_kwargs.setter
    def apply_gradients_kwargs(self, value: dict[str, object]) -> None:
        if not isinstance(value, dict):
            raise TypeError("OptimizerFunctionOutput.apply_gradients_kwargs must be a dict.")
        self._apply_gradients_kwargs = value

    def _no_keras_compute_gradients(self, name: str, value: object) -> None:
        # As the original: a Keras optimizer computes no gradients of its own.
        if value and self._keras:
            raise ValueError(
                f"OptimizerFunctionOutput.{name} may not be used with OptimizerV2 instances."
            )

    @property
    def variables(self) -> Sequence[tf.Variable]:
        return self._variables

    @variables.setter
    def variables(self, value: Sequence[tf.Variable]) -> None:
        if not isinstance(value, (tuple, list)):
            raise TypeError("OptimizerFunctionOutput.variables must be a tuple or list.")
        if value and not self._keras:
            raise ValueError("OptimizerFunctionOutput.variables may only be used with OptimizerV2.")
        if self._tape is not None and value:
            raise ValueError(
                "OptimizerFunctionOutput.variables must be empty when "
                "OptimizerFunctionOutput.tape is used."
            )
        self._variables = value

    @property
    def tape(self) -> tf.GradientTape | None:
        return self._tape

    @tape.setter
    def tape(self, value: tf.GradientTape | None) -> None:
        if value and not isinstance(value, tf.GradientTape):
            raise TypeError("OptimizerFunctionOutput.tape must be a GradientTape.")
        if value and not self._keras:
            raise ValueError("OptimizerFunctionOutput.tape may only be used with OptimizerV2.")
        if value and self.variables:
            raise ValueError(
                "OptimizerFunctionOutput.tape may not be used when "
                "OptimizerFunctionOutput.variables is nonempty."
            )
        if value and self._gradient_capture_context:
            raise ValueError(
                "OptimizerFunctionOutput.tape may not be used when "
                "OptimizerFunctionOutput.gradient_capture_context is nonempty."
            )
        self._tape = value or None

    @property
    def gradient_capture_context(self) -> GradientCaptureContext | None:
        return self._gradient_capture_context

    @gradient_capture_context.setter
    def gradient_capture_context(self, value: GradientCaptureContext | None) -> None:
        if value and not isinstance(value, GradientCaptureContext):
            raise TypeError(
                "OptimizerFunctionOutput.gradient_capture_context must be an "
                "ipu.eager.backprop.GradientCollectionContext."
            )
        if value and self._tape is not None:
            raise ValueError(
                "OptimizerFunctionOutput.gradient_capture_context may not be used when "
                "OptimizerFunctionOutput.tape is nonempty."
            )
        self._gradient_capture_context = value or None

    @property
    def captured_gradient_outfeed(self) -> IPUOutfeedQueue | None:
        return self._captured_gradient_outfeed

    @captured_gradient_outfeed.setter
    def captured_gradient_outfeed(self, value: IPUOutfeedQueue | None) -> None:
        if value and not isinstance(value, IPUOutfeedQueue):
            raise TypeError(
                "OptimizerFunctionOutput.captured_gradient_outfeed must be an instance of "
                "IPUOutfeedQueue."
            )
        captures = isinstance(self._tape, GradientCaptureTape) or self._gradient_capture_context
        if value and not captures:
            raise ValueError(
                "OptimizerFunctionOutput.captured_gradient_outfeed may not be used when "
                "neither an ipu.eager.backprop.GradientCollectionContext, nor an "
                "ipu.eager.backprop.GradientCaptureTape are provided."
            )
        self._captured_gradient_outfeed = value or None


def _keras_trainable_variables(output: Any) -> list[tf.Variable]:
    """The variables a Keras optimizer's gradients are taken for (see OptimizerFunctionOutput).

    `output` is whatever the optimizer function returned: as the original
    (ops/pipelining_ops.py:1133-1136) its `tape`, then (when that is falsy) its
    `variables` are read, an object without them failing with AttributeError."""
    tape = output.tape
    if tape:
        return list(tape.watched_variables())
    variables = output.variables
    if variables:
        return list(variables)
    # The original's words, its typo kept (ops/pipelining_ops.py:1138-1141).
    raise RuntimeError(
        "No variables to optimize. When using OptimzerV2, OptimizerFunctionOutput must "
        "contain a list of variables or a GradientTape."
    )


def _is_optimizer(opt: object) -> bool:
    return isinstance(opt, tf.compat.v1.train.Optimizer) or hasattr(opt, "apply_gradients")


def recomputation_checkpoint(tensors: Nested, name: str | None = None) -> Nested:
    """Marks tensors to be stored rather than recomputed (numerically the identity)."""
    with ops.name_scope(name or "recomputation_checkpoint"):
        return nest.map_structure(tf.identity, tensors)


def pipeline(
    computational_stages: Sequence[Callable[..., Nested]],
    gradient_accumulation_count: int | None = None,
    gradient_accumulation_dtype: AccumulatorDType = None,
    gradient_accumulation_for_captured_grads: bool = True,
    repeat_count: int = 1,
    batch_serialization_iterations: int = 1,
    inputs: Nested = None,
    infeed_queue: IPUInfeedQueue | None = None,
    outfeed_queue: IPUOutfeedQueue | None = None,
    optimizer_function: Callable[..., OptimizerFunctionOutput] | None = None,
    device_mapping: Sequence[int] | None = None,
    pipeline_schedule: PipelineSchedule | None = None,
    recomputation_mode: RecomputationMode | None = None,
    forward_propagation_stages_poplar_options: Sequence[PipelineStageOptions] | None = None,
    backward_propagation_stages_poplar_options: Sequence[PipelineStageOptions] | None = None,
    weight_update_poplar_options: PipelineStageOptions | None = None,
    offload_weight_update_variables: bool | None = None,
    replicated_optimizer_state_sharding: bool = False,
    offload_activations: bool | None = None,
    offload_gradient_accumulation_buffers: bool | None = None,
    replicated_weight_sharding: bool | None = None,
    offload_weights: bool | None = None,
    continuous_weight_updates: bool = False,
    outfeed_loss: bool = False,
    accumulate_outfeed: bool = False,
    accumulate_outfeed_dtype: OutfeedDType = None,
    outfeed_mask: Sequence[bool] | None = None,
    reduction_method: GradientAccumulationReductionMethod | str = (
        GradientAccumulationReductionMethod.SUM
    ),
    name: str | None = None,
) -> tf.Operation:
    """Runs `computational_stages` as a pipeline; returns the operation that runs it."""
    # The checks in the original's order (ops/pipelining_ops.py:783-972), ours among them.
    training = optimizer_function is not None
    count = _accumulation_count(gradient_accumulation_count)
    # reduction_method is parsed for a training pipeline only (:796-798), and compared,
    # parsed or not, with SUM (:800-804).
    # An inference pipeline accumulates no gradients: its reduction_method is unused.
    reduction = GradientAccumulationReductionMethod.SUM
    if training:
        reduction = GradientAccumulationReductionMethod.parse(reduction_method, "reduction_method")
    given = reduction if training else reduction_method
    if given != GradientAccumulationReductionMethod.SUM and batch_serialization_iterations != 1:
        raise ValueError(
            "batch_serialization_iterations != 1 is only supported when reduction_method is "
            "GradientAccumulationReductionMethod.SUM"
        )
    if continuous_weight_updates:
        raise NotImplementedError(
            "Continuous weight updates are currently not supported. "
            "(continuous_weight_updates is not implemented, nor was it in the original)"
        )
    # batch_serialization_iterations is compared as given (:822-834, :845, :886), so None
    # or a str fails there with Python's TypeError; the op takes it as an int attribute
    # (checked below).
    if pipeline_schedule is None:
        pipeline_schedule = (
            PipelineSchedule.Sequential
            if batch_serialization_iterations > 1
            else PipelineSchedule.Grouped
        )
    schedule = pipeline_options.check_enum(
        pipeline_schedule, PipelineSchedule, "pipeline_schedule", None
    )
    serialized = batch_serialization_iterations > 1
    if serialized and schedule is not PipelineSchedule.Sequential:
        raise NotImplementedError(
            "Batch serialization is only supported with the `Sequential` schedule: "
            "batch_serialization_iterations > 1 needs the Sequential pipeline schedule"
        )
    pipeline_options.check_enum(recomputation_mode, RecomputationMode, "recomputation_mode", None)
    _check_stages_sequence(computational_stages)
    # The original tests `if infeed_queue:`, so a falsy value means "no queue"
    # (ops/pipelining_ops.py:852-860).
    if infeed_queue and not isinstance(infeed_queue, IPUInfeedQueue):
        raise TypeError("infeed_queue is not an instance of ipu_infeed_queue.IPUInfeedQueue")
    if outfeed_queue and not isinstance(outfeed_queue, IPUOutfeedQueue):
        raise TypeError("outfeed_queue is not an instance of ipu_outfeed_queue.IPUOutfeedQueue")
    stages = _check_stages(computational_stages)
    mapping = _check_device_mapping(device_mapping, len(stages), serialized)
    for stage, entry in zip(stages, mapping, strict=True):
        parallel_stages.check_mapping(stage, entry)
    ipus = parallel_stages.flat_ipus(mapping)
    # A replica of this program spans the pipeline's IPUs.
    replicated.require_ipus_per_replica(max(ipus, default=0) + 1)
    if schedule is PipelineSchedule.Interleaved and training and len(set(ipus)) < len(ipus):
        raise NotImplementedError(
            "The pipelining schedule 'Interleaved' does not currently support multiple "
            "pipeline stages on the same device for training graphs. Please use a different "
            "pipeline schedule."
        )
    if serialized and len(set(ipus)) > 1:
        raise NotImplementedError(
            "When using batch serialization, all the pipeline stages need to be mapped to a "
            "single IPU: batch_serialization_iterations > 1 needs every stage on the same IPU"
        )
    pipeline_options.check_stage_options_list(
        forward_propagation_stages_poplar_options,
        "forward_propagation_stages_poplar_options",
        len(stages),
    )
    # The backward and weight-update options are read only by a training pipeline
    # (ops/pipelining_ops.py:937-949): an inference pipeline ignores them.
    if training:
        pipeline_options.check_stage_options_list(
            backward_propagation_stages_poplar_options,
            "backward_propagation_stages_poplar_options",
            len(stages),
        )
    if (
        training
        and weight_update_poplar_options is not None
        and not isinstance(weight_update_poplar_options, PipelineStageOptions)
    ):
        raise TypeError(
            "weight_update_poplar_options to be of type PipelineStageOptions: "
            "weight_update_poplar_options must be a PipelineStageOptions"
        )
    # The original's checks and words (ops/pipelining_ops.py): a mask is any sequence,
    # taken by truth value.
    if outfeed_mask and not training:
        raise ValueError("An optimizer_function must be provided when outfeed_mask is set.")
    if outfeed_loss and not training:
        raise ValueError("An optimizer_function must be provided when outfeed_loss is True.")
    if outfeed_loss and outfeed_mask:
        raise ValueError("Only one of `outfeed_loss` and `outfeed_mask` can be set.")
    if accumulate_outfeed:
        if not outfeed_queue:
            raise ValueError("An outfeed_queue must be provided when accumulate_outfeed is True.")
        if outfeed_queue.outfeed_mode is not IPUOutfeedMode.ALL:
            raise ValueError("To accumulate the outfeed, it must be in IPUOutfeedMode ALL.")
    if (
        training
        and replicated_optimizer_state_sharding
        and offload_weight_update_variables is False
    ):
        # As the original's weight update (ops/op_util.py create_resource_update).
        raise ValueError(
            "To use replicated_optimizer_state_sharding, optimizer state must be offloaded by "
            "using offload_weight_update_variables."
        )
    # The pipeline op's int attributes (ops/functional/pipelining.cc:31-32, `int >= 1`),
    # both converted, then both checked, as TensorFlow's op wrapper does
    # (framework/op_def_library.py:171-179 `_MakeInt`, :81-84 the minimum).
    serialization = _int_attr(batch_serialization_iterations, "batch_serialization_iterations")
    repeats = _int_attr(repeat_count, "repeat_count")
    _attr_minimum(serialization, "batch_serialization_iterations")
    _attr_minimum(repeats, "repeat_count")

    plan = _PipelinePlan(
        stages=stages,
        count=count,
        repeats=repeats,
        inputs=list(inputs)
        if isinstance(inputs, (list, tuple))
        else ([] if inputs is None else [inputs]),
        outfeed=outfeed_queue,
        optimizer_function=optimizer_function,
        mapping=mapping,
        outfeed_loss=outfeed_loss,
        outfeed_mask=[bool(m) for m in outfeed_mask] if outfeed_mask else None,
        accumulate_outfeed=bool(accumulate_outfeed),
        accumulate_outfeed_dtype=accumulate_outfeed_dtype,
        accumulation_dtype=gradient_accumulation_dtype,
        accumulate_captured=bool(gradient_accumulation_for_captured_grads),
        reduction=reduction,
    )
    refused = _depth_refusal(count, schedule, mapping, training)
    capture = stream_capture.current()
    if capture is not None and infeed_queue is not None:
        if refused is not None:
            # Traced for an executable: this is its compilation, which the original refuses.
            raise tf.errors.FailedPreconditionError(None, None, refused)
        # Traced for an executable (application_compile_op): its builder runs the
        # mini-batches, each the stages in order, over each call's elements (on its one
        # host device: a stage's IPU changes where it runs on the chip, not the numbers);
        # after every `count` of them, the weight update (and accumulated outfeed).
        plan._stage_devices = [None] * len(plan.stages)  # noqa: SLF001

        def mini_batch(index: tf.Tensor, *element: Nested) -> tf.Tensor:
            token = plan._mini_batch_in_replica(element[0] if len(element) == 1 else element)  # noqa: SLF001
            with tf.control_dependencies([token]):
                done = tf.cond(
                    tf.equal((index + 1) % count, 0),
                    plan._after_mini_batches_in_replica,  # noqa: SLF001
                    lambda: tf.constant(0),
                )
            with tf.control_dependencies([done]):
                return index + 1

        done = capture.take_loop(
            count * repeats, mini_batch, [tf.constant(0)], infeed_queue, can_stall=True
        )
        return tf.group(done)  # an operation, as the pipeline's

    def build() -> Nested:
        region = region_lib.current_region()
        if region is not None and isinstance(count, int):
            # For the cost model: the schedule's bubble, per group (a count given at run
            # time is not modelled).
            # offload_weight_update_variables=None (remote buffers if the device has them)
            # is modelled as not offloaded.
            region.pipeline = (schedule.name, count, offload_weight_update_variables is True)
        if refused is None or region is None:
            return plan.build(infeed_queue)
        # The original's compiler refuses the count when the program first runs: the
        # pipeline waits for a check that fails then (it runs on the host, in graph mode).
        region.require_graph_mode("the pipeline's iteration count is refused")
        with tf.control_dependencies([pipeline_depth.failing_check(refused)]):
            return plan.build(infeed_queue)

    if region_lib.current_region() is None:
        return device_loop._in_own_region(build)  # noqa: SLF001
    return build()


def _depth_refusal(
    count: int | tf.Tensor, schedule: PipelineSchedule, mapping: list[IpuMapping], training: bool
) -> str | None:
    """Why the original's compiler refuses a count known when the pipeline is built."""
    if not isinstance(count, int):
        return None
    system = configure.maybe_current_system()
    io_tiles = system is not None and system.config.io_tiles.num_io_tiles > 0
    refused = pipeline_depth.refusal(count, schedule, mapping, training, io_tiles)
    if refused is not None and deferred_builds.building_provisionally():
        # Built before the configuration, whose I/O tiles may change the verdict: the
        # program is built again at its first run.
        deferred_builds.uses_stand_in()
    return refused


def _check_stages_sequence(stages: object) -> None:
    if not isinstance(stages, (list, tuple)):
        raise TypeError(
            "computational_stages argument needs to be a list or a tuple: computational_stages "
            f"must be a list or tuple of functions, got {type(stages).__name__}"
        )


def _check_stages(stages: object) -> list[Callable[..., Nested] | ParallelStage]:
    _check_stages_sequence(stages)
    assert isinstance(stages, (list, tuple))
    checked: list[Callable[..., Nested] | ParallelStage] = []
    for stage in stages:
        if isinstance(stage, list):  # functions run side by side (parallel_stages.py)
            checked.append(ParallelStage(stage))
        elif not callable(stage):
            raise TypeError(f"Every computational stage must be callable, got {stage!r}")
        else:
            checked.append(stage)
    if len(stages) < 2:  # as the original (pipelining_ops.py), its message
        raise ValueError("Pipeline requires at least two computational stages.")
    return checked


_INT32_MAX = 2**31 - 1


def _accumulation_count(value: object) -> int | tf.Tensor:
    """gradient_accumulation_count as the original takes it (ops/pipelining_ops.py:783-794).

    None is refused and a Python int (a bool too) must fit an int32 and not be negative;
    anything else goes, as an int32 tensor (a float truncated, a numpy value or a tensor
    cast), the count its value when TensorFlow knows it without running anything, else
    the tensor (a count given at run time). 0, or a negative count from a tensor, is the
    compiler's to refuse (`pipeline_depth`)."""
    if value is None:
        raise ValueError("gradient_accumulation_count must be specified.")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("gradient_accumulation_count must be >= 0.")
        if value > _INT32_MAX:
            raise ValueError("gradient_accumulation_count must be < max int32.")
        return int(value)
    converted = tf.convert_to_tensor(value, dtype_hint=tf.int32)
    count = tf.cast(converted, tf.int32)
    # A str tensor fails in the cast when it runs (there is no str to int cast kernel).
    known = None if converted.dtype == tf.string else tf.get_static_value(count)
    if known is not None and np.ndim(known) == 0:
        return int(known)
    return count


def _int_attr(value: object, name: str) -> int:
    """`value` as an op's int attribute (op_def_library.py:171-179 `_MakeInt`): what
    int() takes (a float truncated), a str or what int() refuses being a TypeError."""
    refused = TypeError(f"Expected int for argument '{name}' not {value!r}.")
    if isinstance(value, str):
        raise refused
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise refused from None


def _attr_minimum(value: int, name: str) -> None:
    # op_def_library.py:81-84, the attribute's minimum (ops/functional/pipelining.cc:31-32).
    if value < 1:
        raise ValueError(f"Attr '{name}' of 'Pipeline' Op passed {value} less than minimum 1.")


def _check_device_mapping(
    device_mapping: object, stages: int, serialized: object
) -> list[IpuMapping]:
    if device_mapping is None:
        return [0] * stages if serialized else list(range(stages))
    if not isinstance(device_mapping, (list, tuple)):
        # The original's messages first (pipelining_ops.py).
        raise TypeError(
            "device_mapping argument needs to be a list or a tuple: device_mapping must be a "
            f"list or tuple of ints, got {device_mapping!r}"
        )
    if len(device_mapping) != stages:
        raise ValueError(
            f"Each stage must be mapped to an IPU: {len(device_mapping)} mappings != {stages} "
            f"stages (device_mapping has {len(device_mapping)} entries but the pipeline has "
            f"{stages} computational stages: give one IPU per stage)"
        )
    # The original puts each entry in an OpSharding proto's int64 field: any integer
    # (numpy's too) goes, other types fail with protobuf's TypeError.
    return [_ipu_index(ipu) for ipu in device_mapping]


def _ipu_index(ipu: object) -> IpuMapping:
    if isinstance(ipu, (list, tuple, range)):
        return [_one_ipu(i) for i in ipu]  # a parallel stage's IPUs
    return _one_ipu(ipu)


def _one_ipu(ipu: object) -> int:
    if isinstance(ipu, bool) or not isinstance(ipu, numbers.Integral):
        raise TypeError(f"device_mapping entries must be ints >= 0, got {ipu!r}")
    index = int(ipu)
    if index < parallel_stages.ALL_DEVICES:
        raise TypeError(f"device_mapping entries must be ints >= 0, got {ipu!r}")
    return index


@dataclasses.dataclass(kw_only=True, eq=False)
class _PipelinePlan:
    """Everything `pipeline` checked, and how to build it in the current region."""

    stages: list[Callable[..., Nested] | ParallelStage]
    count: int | tf.Tensor  # a tensor: given at run time
    repeats: int
    inputs: list[Nested]
    outfeed: IPUOutfeedQueue | None
    optimizer_function: Callable[..., OptimizerFunctionOutput] | None
    mapping: list[IpuMapping]
    outfeed_loss: bool
    outfeed_mask: list[bool] | None
    accumulate_outfeed: bool
    accumulate_outfeed_dtype: OutfeedDType
    accumulation_dtype: AccumulatorDType
    accumulate_captured: bool
    reduction: GradientAccumulationReductionMethod
    _replica_states: dict[int, _ReplicaState] = dataclasses.field(default_factory=dict, init=False)
    # Set by `build`: each stage's host device (None: the region's), and the variables'.
    _stage_devices: list[str | list[str | None] | None] = dataclasses.field(
        default_factory=list, init=False
    )
    _variable_device: str | None = dataclasses.field(default=None, init=False)

    def _state(self) -> _ReplicaState:
        """What this replica's trace built (replicas traced each trace the same plan)."""
        replica = lockstep.tracing_replica()
        return self._replica_states.setdefault(replica, _ReplicaState())

    # Building ------------------------------------------------------------------------------

    def build(self, infeed: IPUInfeedQueue | None) -> tf.Operation:
        region = region_lib.current_region()
        self._stage_devices = self._stage_host_devices(region)
        return self._build_loops(infeed)

    def _build_loops(self, infeed: IPUInfeedQueue | None) -> tf.Operation:
        """The repeats x mini-batches loops; steps run in replica context."""
        if not isinstance(self.count, int):
            # A count given at run time: each mini-batch reads its element on its own.
            outer_input = None
        elif lockstep.replica_count() > 1:
            stacked = self._replica_share_of_infeed(infeed)
            outer_input = device_loop.StackedInput(stacked) if stacked is not None else None
        else:
            stacked = device_loop._prefetch(infeed, self.count * self.repeats)  # noqa: SLF001
            outer_input = None
            if stacked is not None:
                # Mini-batch g of repeat i is element i * G + g.
                lead = [self.repeats, self.count]
                stacked = nest.map_structure(
                    lambda t: tf.reshape(t, [*lead, *t.shape[1:]]), stacked
                )
                outer_input = device_loop.StackedInput(stacked)

        def mini_batch(*element: Nested, **element_kwargs: Nested) -> list[tf.Operation]:
            # The element, as one value: stacked buffers give it whole, an infeed read
            # per mini-batch spreads it (a tuple as arguments, a dict as keywords).
            if element_kwargs:
                args: tuple[Nested, ...] = (dict(element_kwargs),)
            elif len(element) > 1:
                args = (tuple(element),)
            else:
                args = element
            return [
                tf.group(replication.run_in_replica_context(self._mini_batch_in_replica, *args))
            ]

        def after_mini_batches() -> tf.Tensor:
            return replication.run_in_replica_context(self._after_mini_batches_in_replica)

        done = device_loop.repeat_in_groups(
            self.repeats,
            self.count,
            mini_batch,
            after_mini_batches,
            outer_input
            if outer_input is not None
            else (_PerIterationInfeed(infeed) if infeed is not None else None),
        )
        return done if isinstance(done, ops.Operation) else tf.group(done)

    def _replica_share_of_infeed(self, infeed: IPUInfeedQueue | None) -> Nested:
        """This replica's [repeats, mini-batches, ...] infeed elements, fetched once for all.

        Mini-batch g of repeat i on replica r is element (i * G + g) * R + r, as the
        replicas' infeed queues are filled in turn on the IPU.
        """
        if infeed is None:
            return None

        def fetch_for_all(values: list[None]) -> list[Nested]:
            count = len(values)
            with lockstep.outside_replicas():
                stacked = device_loop._prefetch(infeed, self.count * self.repeats * count)  # noqa: SLF001
            if stacked is None:
                return [None] * count
            lead = [self.repeats, self.count, count]
            shaped = nest.map_structure(lambda t: tf.reshape(t, [*lead, *t.shape[1:]]), stacked)
            return [nest.map_structure(lambda t, r=r: t[:, :, r], shaped) for r in range(count)]

        return lockstep.exchange(None, fetch_for_all, "a pipeline's infeed")

    def _stage_host_devices(
        self, region: region_lib.CompiledRegion | None
    ) -> list[str | list[str | None] | None]:
        if region is None or region.device is None:
            return [None] * len(self.stages)
        system = configure.maybe_current_system()
        ordinal = device_scope.current_ipu_ordinal() or 0
        if system is None or ordinal >= len(system.devices):
            return [None] * len(self.stages)
        device = system.device(ordinal)
        needed = max(parallel_stages.flat_ipus(self.mapping), default=0) + 1
        if needed > device.num_ipus:
            raise ValueError(
                f"The pipeline's device_mapping {self.mapping} needs {needed} IPUs but "
                f"{device.name} has {device.num_ipus}: configure a larger device "
                "(IPUConfig.auto_select_ipus)"
            )
        self._variable_device = device.host_device(0)

        def host_device(ipu: int) -> str | None:
            return None if ipu == parallel_stages.ALL_DEVICES else device.host_device(ipu)

        return [
            [host_device(i) for i in ipu] if isinstance(ipu, list) else host_device(ipu)
            for ipu in self.mapping
        ]

    def _mini_batch_in_replica(self, element: Nested = None) -> tf.Tensor:
        """One mini-batch on one replica: stages, gradients, outfeed; returns a token."""
        args = element if element is not None else ()
        outputs, loss, updates = self._forward_and_backward(
            args if isinstance(args, tuple) else (args,), {}
        )
        data = self._outfeed_data(outputs, loss)
        operations = list(updates)
        if data is not None:
            self._check_outfeed(data)
            assert self.outfeed is not None  # checked
            operations.append(
                self._accumulate_outfeed(data)
                if self.accumulate_outfeed
                else self.outfeed.enqueue(data)
            )
        with tf.control_dependencies(operations):
            return tf.constant(0)

    def _after_mini_batches_in_replica(self) -> tf.Tensor:
        """The weight update (and accumulated outfeed) after a repeat's mini-batches."""
        operations: list[tf.Operation] = []
        state = self._state()
        if self.accumulate_outfeed and state.outfeed_accumulators:
            assert self.outfeed is not None  # accumulate_outfeed needs one (checked by pipeline)
            values = [a.read_value() for a in state.outfeed_accumulators]
            enqueue = self.outfeed.enqueue(nest.pack_sequence_as(state.outfeed_structure, values))
            with tf.control_dependencies([enqueue]):
                operations.append(
                    tf.group([a.assign(tf.zeros_like(a)) for a in state.outfeed_accumulators])
                )
        if self.optimizer_function is not None:
            operations.append(self._apply_accumulated())
        with tf.control_dependencies(operations):
            return tf.constant(0)

    def _accumulate_outfeed(self, data: Nested) -> tf.Operation:
        """`accumulate_outfeed`: sums the outfeed data of a repeat's mini-batches."""
        flat = nest.flatten(data)
        if not self._state().outfeed_accumulators:
            dtype = self.accumulate_outfeed_dtype
            self._state().outfeed_accumulators = [
                _ACCUMULATORS.buffer(
                    ("outfeed", id(self.outfeed), index, t.dtype, tuple(t.shape)),
                    t.shape,
                    _outfeed_dtype(dtype, t),
                    "pipeline_outfeed_accumulator",
                )
                for index, t in enumerate(flat)
            ]
            self._state().outfeed_structure = data
        return tf.group(
            [
                a.assign_add(tf.cast(t, a.dtype))
                for a, t in zip(self._state().outfeed_accumulators, flat, strict=True)
            ]
        )

    # Forward, backward and weight update ------------------------------------------------------

    def _forward_and_backward(
        self, element: tuple[Nested, ...], element_kwargs: dict[str, Nested]
    ) -> tuple[Nested, tf.Tensor | None, list[object]]:
        args, kwargs = self._stage0_arguments(element, element_kwargs)
        captures = CaptureCheck(allowed=nest.flatten([self.inputs, args, kwargs]))
        with tf.GradientTape(persistent=False) as tape:
            outputs = self._run_stages(args, kwargs)
            captures.check()
            if self.optimizer_function is None:
                return outputs, None, []
            returned = self._call_with(self.optimizer_function, outputs)
        # Whatever the optimizer function returns is read as the original reads it
        # (ops/pipelining_ops.py:1092-1098): no type check, an object without these
        # attributes failing with AttributeError.
        result = _OptimizerOutput.read(returned)
        self._state().optimizer_output = result
        # As the original, a missing outfeed is found before the gradients are computed.
        self._check_outfeed(self._outfeed_data(outputs, result.loss))
        grads_and_vars: list[tuple[tf.Tensor, object]] = list(self._gradients(result, tape))
        captured = captured_gradients.read(returned)
        kept: list[object] = []
        if captured and self.accumulate_captured:
            grads_and_vars += tagged_pairs(captured)
        elif captured:
            kept = self._state().last_captured.keep(captured)
        kept += self._state().hyperparameters.keep(result.opt)
        return outputs, result.loss, [*self._accumulate(grads_and_vars), *kept]

    def _check_outfeed(self, data: Nested) -> None:
        if data is None or self.outfeed is not None:
            return
        # The original's messages (pipelining_ops.py).
        if self.outfeed_loss:
            raise ValueError("An outfeed_queue must be provided when outfeed_loss is True")
        listed = ", ".join(str(t) for t in nest.flatten(data))
        raise ValueError(
            f"The last computational stage has tensor outputs: {listed}, but no "
            "outfeed_queue has been provided."
        )

    def _stage0_arguments(
        self, element: tuple[Nested, ...], element_kwargs: dict[str, Nested]
    ) -> tuple[list[Nested], dict[str, Nested]]:
        """The first stage's arguments: the pipeline inputs, then the infeed element.

        The inputs reach the stages as tensors (the original's pipeline function takes
        them as its arguments): a Python number given as an input is a tensor there."""
        inputs = [nest.map_structure(tf.convert_to_tensor, value) for value in self.inputs]
        if element_kwargs:
            return inputs, dict(element_kwargs)
        if len(element) == 1 and isinstance(element[0], dict):
            return inputs, dict(element[0])
        if len(element) == 1 and isinstance(element[0], (list, tuple)):
            return inputs + list(element[0]), {}
        return inputs + list(element), {}

    def _run_stages(self, args: list[Nested], kwargs: dict[str, Nested]) -> Nested:
        outputs = None
        for index, stage in enumerate(self.stages):
            device = self._stage_devices[index]
            if isinstance(stage, ParallelStage):
                on = device if isinstance(device, list) else [None] * len(stage.functions)
                # Each function takes the stage's arguments; their outputs, one flat list.
                outputs = parallel_stages.to_flat_list(
                    [
                        self._run_stage(function, on[i], index == 0, args, kwargs, outputs)
                        for i, function in enumerate(stage.functions)
                    ]
                )
            else:
                on_one = device if isinstance(device, str) else None
                outputs = self._run_stage(stage, on_one, index == 0, args, kwargs, outputs)
        return outputs

    def _run_stage(
        self,
        function: Callable[..., Nested],
        device: str | None,
        first: bool,
        args: list[Nested],
        kwargs: dict[str, Nested],
        previous: Nested,
    ) -> Nested:
        """One stage's function on its IPU's host device: the first stage takes the
        pipeline's inputs and element, the others the previous stage's outputs."""
        with ops.device(self._stage_placer(device)) if device else contextlib.nullcontext():
            return function(*args, **kwargs) if first else self._call_with(function, previous)

    def _stage_placer(self, stage_device: str) -> Callable[[ops.Operation], str]:
        """Places a stage's ops on its IPU's host device, and its variables with the region's."""
        return ipu_placement.placer(stage_device, self._variable_device)

    @staticmethod
    def _call_with(function: Callable[..., Nested], outputs: Nested) -> Nested:
        if outputs is None:
            return function()
        if isinstance(outputs, dict):
            return function(**outputs)
        if isinstance(outputs, (list, tuple)):
            return function(*outputs)
        return function(outputs)

    def _gradients(
        self, result: _OptimizerOutput, tape: tf.GradientTape
    ) -> list[tuple[tf.Tensor, tf.Variable]]:
        opt = result.opt
        if isinstance(opt, tf.compat.v1.train.Optimizer):
            kwargs = {**result.compute_gradients_kwargs}
            if (
                tf.inside_function()
                and not tf.compat.v1.trainable_variables()
                and "var_list" not in kwargs
            ):
                kwargs["var_list"] = [v for v in tape.watched_variables() if v.trainable]
            pairs = opt.compute_gradients(result.loss, *result.compute_gradients_args, **kwargs)
            return _zeros_for_stage_variables(pairs, tape)
        variables = _keras_trainable_variables(result.returned)
        gradients = tape.gradient(result.loss, variables)
        return _zeros_for_stage_variables(list(zip(gradients, variables, strict=True)), tape)

    def _accumulate(self, grads_and_vars: list[tuple[tf.Tensor, object]]) -> list[object]:
        """Adds a mini-batch's gradients to the accumulators; returns the update operations."""
        accumulation: GradientAccumulation[object] = GradientAccumulation(
            self.count,
            self.reduction,
            _ACCUMULATORS,
            dtype=self.accumulation_dtype,
            owner="gradient_accumulation_dtype",
        )
        self._state().accumulation = accumulation
        return [accumulation.add(grads_and_vars)]

    def _apply_accumulated(self) -> tf.Operation:
        state = self._state()
        result, accumulation = state.optimizer_output, state.accumulation
        # Both are set by this replica's mini-batch (`_forward_and_backward`), traced first.
        assert result is not None and accumulation is not None
        kept = state.last_captured.read()

        def apply(accumulated: list[tuple[tf.Tensor, object]]) -> list[object]:
            variables, captured = split_tagged([*accumulated, *kept])
            kwargs = {**result.apply_gradients_kwargs}
            if captured_gradients.optimizer_takes_them(result.opt):
                kwargs["captured_grads"] = captured or None
            with state.hyperparameters.swapped_in(result.opt):
                applied = [
                    result.opt.apply_gradients(variables, *result.apply_gradients_args, **kwargs)
                ]
            # The original reads the outfeed only when gradients were captured (:1204).
            if captured and result.returned.captured_gradient_outfeed:
                applied.append(result.returned.captured_gradient_outfeed.enqueue(captured))
            return applied

        return accumulation.apply_and_restart(apply)

    # Outfeed data ----------------------------------------------------------------------------

    def _outfeed_data(self, outputs: Nested, loss: tf.Tensor | None) -> Nested:
        """What a mini-batch outfeeds. As the original's (ops/pipelining_ops.py): a training
        pipeline's or an accumulated outfeed's data is the list of the last stage's outputs
        (a single output too); an inference pipeline's is the outputs as the stage gave them."""
        if self.outfeed_loss:
            return loss
        if outputs is None or (isinstance(outputs, (list, tuple)) and not outputs):
            return None
        as_list = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        if self.optimizer_function is not None or self.accumulate_outfeed:
            outputs = as_list
        if self.outfeed_mask is not None:
            flat = as_list
            if len(flat) != len(self.outfeed_mask):
                raise ValueError(
                    f"The last computational stage has {len(flat)} outputs, but the "
                    f"`outfeed_mask` has elements {len(self.outfeed_mask)} - these need to "
                    "match in size."
                )
            kept = [o for o, masked in zip(flat, self.outfeed_mask, strict=True) if not masked]
            return kept or None
        return outputs


def _zeros_for_stage_variables(
    pairs: Sequence[tuple[tf.Tensor | None, tf.Variable]], tape: tf.GradientTape
) -> list[tuple[tf.Tensor, tf.Variable]]:
    """The (gradient, variable) pairs to accumulate. The original's stages are function
    calls taking the variables they read, through which every such variable gets a
    gradient, zeros where the loss does not depend on it; the others have none."""
    read = {id(v) for v in tape.watched_variables()}
    kept = []
    for gradient, variable in pairs:
        if gradient is None and id(variable) in read:
            gradient = tf.zeros_like(variable)
        if gradient is not None:
            kept.append((gradient, variable))
    return kept


@dataclasses.dataclass(frozen=True)
class _OptimizerOutput:
    """What the pipeline read of the optimizer function's result (an
    OptimizerFunctionOutput or any object with its attributes)."""

    returned: Any
    loss: Any
    opt: Any
    compute_gradients_args: Any
    compute_gradients_kwargs: Any
    apply_gradients_args: Any
    apply_gradients_kwargs: Any

    @classmethod
    def read(cls, returned: Any) -> _OptimizerOutput:
        """The attributes in the original's order (ops/pipelining_ops.py:1093-1098)."""
        loss = returned.loss
        opt = returned.opt
        compute_gradients_args = returned.compute_gradients_args
        compute_gradients_kwargs = returned.compute_gradients_kwargs
        apply_gradients_args = returned.apply_gradients_args
        apply_gradients_kwargs = returned.apply_gradients_kwargs
        return cls(
            returned,
            loss,
            opt,
            compute_gradients_args,
            compute_gradients_kwargs,
            apply_gradients_args,
            apply_gradients_kwargs,
        )


class _PerIterationInfeed:
    """An infeed read once per mini-batch (when it cannot be read before the region)."""

    def __init__(self, infeed: IPUInfeedQueue | None) -> None:
        self._infeed = infeed

    def _fetch_one(self) -> Nested:
        if self._infeed is None:
            return None
        return self._infeed._fetch_one()  # noqa: SLF001

    def _fetch_stacked(self, count: int) -> Nested:
        return None  # not read ahead: the element of each mini-batch is read on its own


class _ReplicaState:
    """One replica's accumulators and optimizer output, built while its body is traced."""

    def __init__(self) -> None:
        self.outfeed_accumulators: list[tf.Variable] = []
        self.outfeed_structure: Nested = None
        self.optimizer_output: _OptimizerOutput | None = None
        self.accumulation: GradientAccumulation[object] | None = None
        # The last mini-batch's captured gradients (gradient_accumulation_for_captured_grads
        # False).
        self.last_captured = LastCapturedGradients(_ACCUMULATORS)
        # Optimizer tensors the mini-batch computed (a learning rate from a stage output).
        self.hyperparameters = KeptHyperparameters(_ACCUMULATORS)


# Pipelines' accumulators (gradients, outfeed data) are kept across traces: a pipeline
# traced again finds its own. They restart after every repeat, so pipelines training the
# same variables one after another may share them.
_ACCUMULATORS = AccumulatorStore("pipeline_mini_batch_counter")


def _outfeed_dtype(dtype: OutfeedDType, tensor: tf.Tensor) -> tf.DType:
    """As the original's op_util.get_accumulator_dtype: a dtype (a NumPy type too, which
    is callable), else a callable of the tensor."""
    if dtype is None:
        return tensor.dtype
    try:
        return tf.as_dtype(dtype)
    except TypeError:
        if not callable(dtype):
            raise
    return tf.as_dtype(dtype(tensor))
