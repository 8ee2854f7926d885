"""`popart.TrainingSession`: trains an ONNX model on an emulated IPU.

The session lowers the model like an inference session, then adds what training needs: the
loss (a scalar tensor of the model), the weights it trains (the floating-point initializers
the loss depends on), their optimizer state and gradient accumulators (device variables
named with PopART's reserved prefixes, `reserved_tensors.py`), and a program that runs
forward, backward (TensorFlow's autodiff of the lowered graph) and the optimizer's update
for every micro-batch (`training_program.py`). Everything else (data flow, step IOs, weights
and their files, random state, reports) is the inference session's (`session_core.py`).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.engine.program import LoopProgram
from openipu._src.popart import reserved_names
from openipu._src.popart.builder.enums import ReductionType
from openipu._src.popart.dataflow import DataFlow
from openipu._src.popart.devices.device_info import DeviceInfo
from openipu._src.popart.errors import OptionTypeError, popart_exception
from openipu._src.popart.external_data import write_back_to_back
from openipu._src.popart.input_shape_info import InputShapeInfo
from openipu._src.popart.lowering.ops.normalization import check_batch_norm_shapes
from openipu._src.popart.optimizers.adam import Adam
from openipu._src.popart.optimizers.optimizer import Optimizer
from openipu._src.popart.optimizers.sgd import SGD
from openipu._src.popart.options.enums import (
    GradientTensorTrackingMethod,
    MeanReductionStrategy,
    VirtualGraphMode,
)
from openipu._src.popart.options.patterns import Patterns
from openipu._src.popart.options.session_options import SessionOptions
from openipu._src.popart.options.typed_fields import check_instance, check_int
from openipu._src.popart.session import (
    grad_patterns,
    ir_view,
    loss_graph,
    reserved_tensors,
    sgd0_tensors,
)
from openipu._src.popart.session.anchors import AnchorPlan
from openipu._src.popart.session.loss_scaling import (
    FINAL_LOSS_SCALE_ID,
    STATISTICS_ID,
    UPDATE_FACTOR_ID,
    AutomaticLossScaling,
    automatically_tracked,
    check_settings,
)
from openipu._src.popart.session.reserved_tensors import ReservedKind, ReservedTensor
from openipu._src.popart.session.session_core import SessionCore
from openipu._src.popart.session.step_program import build_program
from openipu._src.popart.session.stepio import InputPlan, StepIO
from openipu._src.popart.session.tensor_types import TensorSignature
from openipu._src.popart.session.training_program import TrainingSpec, build_training_program
from openipu._src.popart.session.training_variables import TrainingVariables

logger = logging.getLogger("popart.session")


class TrainingSession(SessionCore):
    """`TrainingSession(fnModel, dataFlow, loss, optimizer, deviceInfo,
    inputShapeInfo=InputShapeInfo(), patterns=None, userOptions=SessionOptions(),
    name='training')`.

    `loss` is the id of a scalar tensor of the model (a loss op's output, such as
    `aiGraphcore.nllloss` or `l1loss`); `optimizer` a `popart.SGD`, `ConstSGD`, `Adam` or
    `Adaptive`. Call `prepareDevice()` and `weightsFromHost()` before the first `run`.
    """

    _training = True
    _default_name = "training"

    def __init__(
        self,
        fnModel: Any,  # noqa: N803 - the original's argument names
        dataFlow: DataFlow,  # noqa: N803
        loss: str,
        optimizer: Optimizer,
        deviceInfo: DeviceInfo,  # noqa: N803
        inputShapeInfo: InputShapeInfo | None = None,  # noqa: N803
        patterns: Patterns | None = None,
        userOptions: SessionOptions | None = None,  # noqa: N803
        name: str | None = None,
    ) -> None:
        if not isinstance(loss, str):
            raise OptionTypeError(
                f"TrainingSession loss must be the id (str) of the loss tensor, got {loss!r} "
                f"({type(loss).__name__})"
            )
        self._loss_id = loss
        self._optimizer = check_instance(optimizer, Optimizer, "TrainingSession optimizer").copy()
        self._streams: dict[str, list[tuple[int, Callable[[np.ndarray], object]]]] = {}
        super().__init__(fnModel, dataFlow, deviceInfo, inputShapeInfo, patterns, userOptions, name)

    # -- construction ------------------------------------------------------------------------

    def _loss_for_rules(self) -> str | None:
        return self._loss_id

    def _after_lowering(self) -> None:
        self._check_loss()
        for node in loss_graph.inference_batch_norms_in(
            self._model.graph, self._gradient_reachable()
        ):
            # PopART sets the op up (checking its inputs' shapes) before it makes the grad op.
            shapes = [list(self._types.get(name).shape) for name in node.input[:5]]
            spatial = next((a.i for a in node.attribute if a.name == "spatial"), 1)
            check_batch_norm_shapes(shapes[0], shapes[1:], bool(spatial))
            name = node.name or node.output[0]
            raise popart_exception(
                f'BatchNorm Op "{name}" has 1 output(s) which means it is in inference mode, '
                "but its gradient Op is being created. To use the BatchNorm Op in inference "
                "mode during training, it has to be detached first."
            )
        depends_on = loss_graph.ancestors(self._model.graph, self._loss_id)
        self._loss_ancestors = depends_on
        weights = self._weights
        statistics = loss_graph.batch_norm_statistics(self._model.graph, set(weights.weight_ids))
        # Weights a CopyVarUpdate writes are stored after every step like the statistics.
        statistics.update(loss_graph.copy_var_updates(self._model.graph, set(weights.weight_ids)))
        self._trained = [
            name for name in weights.weight_ids if name in depends_on and name not in statistics
        ]
        self._statistics = statistics
        self._check_specific_values(weights.weight_ids)
        grad_patterns.check_grad_patterns(
            self._model.graph,
            self._gradient_reachable()
            & grad_patterns.weight_dependent(self._model.graph, set(self._trained)),
            self._patterns,
        )
        accumulating = self.accumulationFactor > 1
        self._state_slots: dict[str, tuple[str, ...]] = {}
        state: dict[str, np.ndarray] = {}
        grouped_state = {}
        for name in self._trained:
            weight = weights.host[name]
            grouped = weights.grouped.get(name)
            split = grouped is not None and grouped.split
            ids = []
            for slot in self._optimizer.state_slots(name, accumulating):
                state_id = slot.prefix + name
                # A grouped weight's state is grouped as it is: one value per group
                # (willow/src/patterns/optimizerdecompose.cpp, addStateTensor), unless the
                # optimizer adds it ungrouped, from the weight's first values (SGD1's Accl___,
                # willow/src/patterns/sgd1decompose.cpp, addAcclInTensor).
                if split and slot.grouped:
                    initial = np.stack([slot.initial_value(row) for row in weight])
                else:
                    initial = slot.initial_value(weight[0] if split else weight)
                state[state_id] = self._restored_state(state_id, initial)
                if grouped is not None and slot.grouped:
                    grouped_state[state_id] = grouped
                ids.append(state_id)
            self._state_slots[name] = tuple(ids)
        self._accumulators: dict[str, str] = {}
        if accumulating:
            prefix = reserved_names.reservedAccumPrefix()
            for name in self._trained:
                dtype = self._optimizer.accumulator_dtype(tf.as_dtype(weights.host[name].dtype))
                self._accumulators[name] = prefix + name
                # Each replica accumulates its own gradients (in its own copy): one replica's
                # shape.
                state[prefix + name] = np.zeros(weights.replica_shape(name), dtype.as_numpy_dtype)
        weights.add_state(state, grouped_state)
        # What weightsToHost does not fetch, so readWeights reads the zeros the host buffers
        # start with (Ir::storingIsDisabledForTensor, willow/src/ir.cpp): the accumulators
        # always, the optimizer state when its streams are disabled.
        weights.unstreamed = set(self._accumulators.values())
        if self._options.disableOptimizerStateTensorStreams:
            weights.unstreamed.update(state)
        self._place_external_state(state)
        self._automatic_loss_scaling = self._plan_automatic_loss_scaling()
        self._variables = TrainingVariables(
            self._optimizer, self._trained, self._automatic_loss_scaling is not None
        )

    def _model_state_ids(self) -> list[tuple[str, str]]:
        """(state id, weight id) of the optimizer state a model file gets, in the original's
        order: by kind of state, then by weight (the order in which its
        external_tensorproto_data_test finds them in an external data file)."""
        if self._options.disableOptimizerStateTensorStreams:
            return []
        slots = list(self._state_slots.items())
        kinds = max((len(ids) for _, ids in slots), default=0)
        return [(ids[k], weight) for k in range(kinds) for weight, ids in slots if k < len(ids)]

    def _place_external_state(self, state: dict[str, np.ndarray]) -> None:
        """The optimizer state of a weight saved in an external file is appended to that file
        as the session prepares, unless the model has it already (willow/src/ir.cpp,
        addAdditionalModelProtoTensors)."""
        for state_id, weight in self._model_state_ids():
            entry = self._external.get(weight)
            if entry is not None and state_id not in self._external:
                data = np.ascontiguousarray(state[state_id]).tobytes()
                self._external.update(
                    write_back_to_back(entry.location, [(state_id, data)], append=True)
                )

    def _check_specific_values(self, weight_ids: list[str]) -> None:
        """Values `insertSpecific` gave for tensors that are no trained weight are unused: the
        original accepts them silently; a warning names them (often a mistyped id)."""
        for tensor_id in self._optimizer.specific_weight_ids():
            if tensor_id not in self._trained:
                what = "is not trained" if tensor_id in weight_ids else "is not a weight"
                logger.warning(
                    "The optimizer has specific values for '%s', which %s in this session "
                    "(trained weights: %s): they are not used",
                    tensor_id,
                    what,
                    self._trained,
                )

    def _ir_loss(self) -> str | None:
        return self._loss_id

    def _ir_training(self) -> ir_view.IrTraining | None:
        if not hasattr(self, "_state_slots"):
            return None
        options = self._options
        als = self._automatic_loss_scaling
        return ir_view.IrTraining(
            loss=self._loss_id,
            trained=list(self._trained),
            updates={name: self._ir_update_kind(name) for name in self._trained},
            state=dict(self._state_slots),
            accumulators=dict(self._accumulators),
            clip_groups=[list(c.weightIds) for c in self._optimizer.clip_norm_settings],
            tracked=als.tracked if als is not None else (),
            # The optimizer's `debugContext` (a name, or a DebugContext: a str too).
            debug_context=str(getattr(self._optimizer, "_debug_context", "")),
            # willow/src/transforms/automaticlossscaling.cpp; SessionOptions::shouldDelayVarUpdates.
            histograms_first=bool(
                options.delayVarUpdates
                and options.scheduleNonWeightUpdateGradientConsumersEarly
                and options.batchSerializationSettings.factor < 2
                and not options.explicitRecomputation
                and not options.enableExplicitMainLoops
                and not (
                    options.virtualGraphMode == VirtualGraphMode.ExecutionPhases
                    and options.executionPhaseSettings.phases >= 2
                )
            ),
        )

    def _ir_update_kind(self, weight: str) -> str:
        """Which of the original's decompositions updates `weight` (willow/src/patterns/
        sgd0decompose.cpp ... adaptivedecompose.cpp)."""
        optimizer = self._optimizer
        if isinstance(optimizer, Adam):
            return "Lamb" if optimizer.is_lamb else "Adam"
        if isinstance(optimizer, SGD):
            state = self._state_slots.get(weight, ())
            if not state:
                return "SGD0"
            accl1 = reserved_names.reservedAccl1Prefix()
            return "SGD2" if any(s.startswith(accl1) for s in state) else "SGD1"
        return "Adaptive"

    def _check_loss(self) -> None:
        known = self._lowered.tensor_names()
        if self._loss_id not in known:
            close = difflib.get_close_matches(self._loss_id, known, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise popart_exception(
                f"Could not find loss tensor '{self._loss_id}' in main graph tensors.{hint}"
            )
        signature = self._types.get(self._loss_id)
        # The IR refuses a loss of more than one element (willow/src/ir.cpp, setFinalLoss); one
        # of shape [1, 1] trains (operators_test/l1_test.py, test_l1_reduction_equiv).
        if math.prod(signature.shape) > 1:
            # The IR's words last (operators_test/loss_test.py matches the end).
            raise popart_exception(
                f"A loss of shape {list(signature.shape)} has more than one element; reduce it, "
                "e.g. with a loss op's ReductionType.Mean or Sum. Loss tensor, "
                f"'{self._loss_id}', must be a scalar tensor"
            )
        # The IR takes a loss of any numeric type (willow/src/ir.cpp, setFinalLoss):
        # operators_test/reducemedian_test.py trains through an int32 ReduceMedian.
        if not (signature.dtype.is_floating or signature.dtype.is_integer):
            raise popart_exception(
                f"Loss tensor, '{self._loss_id}', is {signature.dtype.name}: a loss must be a "
                "number"
            )
        self._loss_signature = signature

    def _restored_state(self, state_id: str, initial: np.ndarray) -> np.ndarray:
        """A state tensor's start: the model's initializer of that name (a checkpoint written
        by modelToHost), or the optimizer's initial value."""
        saved = self._weights.host.get(state_id)
        if saved is None:
            return initial
        if saved.shape != initial.shape or saved.dtype != initial.dtype:
            raise popart_exception(
                f"The model's initializer '{state_id}' ({saved.dtype} {list(saved.shape)}) "
                f"cannot be this session's optimizer state of that name, which is "
                f"{initial.dtype} {list(initial.shape)}"
            )
        return saved

    def _plan_automatic_loss_scaling(self) -> AutomaticLossScaling | None:
        """The original's AutomaticLossScale transform's checks, in its order, and the
        tensors whose gradients it tracks (willow/src/transforms/automaticlossscaling.cpp)."""
        settings = self._options.automaticLossScalingSettings
        if not settings.enabled:
            return None
        if isinstance(self._optimizer, Adam) and self._optimizer.scaled_optimizer_state:
            raise popart_exception(
                "scaledOptimizerState and automaticLossScaling are not compatible."
            )
        if self._optimizer.loss_scaling.isConst():
            raise popart_exception(
                "Automatic loss scaling changes the loss scaling, so pass {'lossScaling': "
                "(value, False)}. [AutomaticLossScale transform] The optimizer must have "
                "non-const loss scaling"
            )
        if self._options.enablePipelining and not self._options.enableGradientAccumulation:
            raise popart_exception(
                "[AutomaticLossScale transform] Automatic loss scaling is not currently "
                "supported when the 'enablePipelining' SessionOption is set to 'true', but the "
                "'enableGradientAccumulation' SessionOption is set to 'false'"
            )
        check_settings(settings)
        graph = self._model.graph
        with_gradient = loss_graph.descendants(graph, set(self._trained)) & (
            self._gradient_reachable()
        )
        method = settings.gradientTensorTrackingMethod
        if method is GradientTensorTrackingMethod.GradientsOfUserSpecifiedTensors:
            names = list(settings.toTrackTensors or [])
            unknown = [name for name in names if name not in self._lowered.tensor_names()]
            if unknown:
                raise popart_exception(
                    f"automaticLossScalingSettings.toTrackTensors names {unknown}, which are not "
                    "tensors of the model"
                )
            tracked = [name for name in names if name in with_gradient]
        else:
            floating = {
                name: self._types.get(name).dtype == tf.float16
                for name in with_gradient
                if name in self._lowered.tensor_names()
            }
            tracked = automatically_tracked(
                graph, self._loss_id, method, with_gradient, set(self._weights.weight_ids), floating
            )
        return AutomaticLossScaling.plan(settings, tracked)

    def _anchor_signatures(self, anchor_ids: list[str]) -> dict[str, TensorSignature]:
        self._reserved_anchors: dict[str, ReservedTensor] = {}
        self._optimizer_tensors: dict[str, sgd0_tensors.Sgd0Tensor] = {}
        ordinary = []
        for tensor_id in anchor_ids:
            reserved = self._parse_reserved(tensor_id)
            optimizer_tensor = self._optimizer_tensor(tensor_id) if reserved is None else None
            if optimizer_tensor is not None:
                self._optimizer_tensors[tensor_id] = optimizer_tensor
            elif reserved is None:
                ordinary.append(tensor_id)
            else:
                self._reserved_anchors[tensor_id] = reserved
        signatures = super()._anchor_signatures(ordinary)
        for tensor_id, reserved in self._reserved_anchors.items():
            signatures[tensor_id] = self._reserved_signature(reserved)
        for tensor_id, optimizer_tensor in self._optimizer_tensors.items():
            signatures[tensor_id] = TensorSignature(optimizer_tensor.dtype, ())
        return {tensor_id: signatures[tensor_id] for tensor_id in anchor_ids}

    def _optimizer_tensor(self, tensor_id: str) -> sgd0_tensors.Sgd0Tensor | None:
        """The optimizer tensor of the original's SGD0 update `tensor_id` names, if any."""
        types = {}
        for name in self._trained:
            dtype = tf.as_dtype(self._weights.host[name].dtype)
            types[name] = (dtype, TensorSignature(dtype, ()).tensor_info().data_type())
        options = self._options
        post_mean = (
            options.accumulationAndReplicationReductionType is ReductionType.Mean
            and options.meanAccumulationAndReplicationReductionStrategy
            is MeanReductionStrategy.Post
        )
        factor = float(self.accumulationFactor * self.replicationFactor) if post_mean else 1.0
        return sgd0_tensors.resolve(
            tensor_id, self._optimizer, types, self.accumulationFactor > 1, factor
        )

    def _carries_gradient(self, dtype: tf.DType) -> bool:
        """Floating-point tensors carry gradients; under an integer loss integer ones do
        too (the original's grad ops run in the loss's type: operators_test/
        reducemedian_test.py anchors an int32 input's gradient)."""
        return bool(
            dtype.is_floating or (dtype.is_integer and self._loss_signature.dtype.is_integer)
        )

    def _gradient_reachable(self) -> set[str]:
        """The tensors the loss's gradient reaches (found once, when a gradient is anchored)."""
        if getattr(self, "_reachable", None) is None:

            def carries_gradient(tensor_id: str) -> bool:
                try:
                    return self._carries_gradient(self._types.get(tensor_id).dtype)
                except popart_exception:
                    return True  # no static type (a sequence...): let autodiff decide

            self._reachable = loss_graph.gradient_reachable(
                self._model.graph, self._loss_id, carries_gradient
            )
        return self._reachable

    def _reserved_signature(self, reserved: ReservedTensor) -> TensorSignature:
        tensor_id, base = reserved.tensor_id, reserved.base
        if reserved.kind is ReservedKind.GRADIENT:
            if base not in self._lowered.tensor_names():
                raise popart_exception(
                    f"Anchor tensor `{tensor_id}' not in Ir Tensors. It is the gradient of "
                    f"'{base}', which is not a tensor of the model"
                )
            signature = self._types.get(base)
            if (
                not self._carries_gradient(signature.dtype)
                or base not in self._gradient_reachable()
            ):
                # The IR's words first (willow/src/ir.cpp, validateAnchors;
                # operators_test/cast_test_py.py), then why.
                raise popart_exception(
                    f"Anchor tensor `{tensor_id}' not in Ir Tensors. Tensor '{base}' has no "
                    f"gradient (the loss "
                    f"'{self._loss_id}' does not depend on it"
                    + (
                        ", or only through integer tensors, which carry none)"
                        if signature.dtype.is_floating
                        else f", and it is {signature.dtype.name})"
                    )
                )
            return signature
        if reserved.kind in (
            ReservedKind.FINAL_LOSS_SCALE,
            ReservedKind.LOSS_SCALE_UPDATE_FACTOR,
        ):
            return TensorSignature(tf.float32, ())
        if reserved.kind is ReservedKind.LOSS_SCALE_STATISTICS:
            return TensorSignature(tf.float32, (2,))
        if reserved.kind is ReservedKind.RESTORED:
            return self._restored_signature(reserved)
        if reserved.kind is ReservedKind.LOSS_SCALING:
            signature = self._loss_scaling_signature()
            expected = self._loss_scaling_id()
            if tensor_id != expected:
                raise popart_exception(
                    f"Anchor '{tensor_id}' is not a tensor of this session: its loss scaling is "
                    f"'{expected}'"
                )
            return signature
        if reserved.kind is ReservedKind.UPDATED_WEIGHT:
            if base not in self._trained:
                raise popart_exception(
                    f"Anchor '{tensor_id}': '{base}' is not a weight this session trains "
                    f"(trained weights: {self._trained})"
                )
            return self._variable_signature(base)
        if tensor_id not in self._weights.state_ids:
            kind = reserved.kind.value
            raise popart_exception(
                f"Anchor '{tensor_id}' is not a tensor of this session: no {kind} of that name "
                f"(with {self._optimizer.structure_description()} and accumulation factor "
                f"{self.accumulationFactor}, the optimizer state is {self._weights.state_ids})"
            )
        return self._variable_signature(tensor_id)

    def _restored_signature(self, reserved: ReservedTensor) -> TensorSignature:
        """A pipelined training session stashes the activations (and inputs) its backward
        pass needs in a later pipeline stage, and restores them there
        (willow/src/transforms/pipeline.cpp); the restored tensor holds the same values."""
        base = reserved.base
        stashable = (
            self._options.enablePipelining
            and base in self._lowered.tensor_names()
            and base not in self._weights.host
            and base in self._loss_ancestors
        )
        if not stashable:
            raise popart_exception(
                f"Anchor tensor `{reserved.tensor_id}' not in Ir Tensors. Only a pipelined "
                "training session restores stashed activations, those the loss depends on "
                f"('{base}' is not one of them)"
            )
        return self._types.get(base)

    def _tensor_names(self) -> list[str]:
        """The model's tensors, and the training tensors a session of the original has: the
        gradients of the floating-point tensors the loss depends on, the updated weights,
        the optimizer state and accumulators, and the loss scaling."""
        names = super()._tensor_names()
        gradient = reserved_names.reservedGradientPrefix()
        updated = reserved_names.reservedUpdatedVarPrefix()
        differentiable = [
            name
            for name in names
            if name in self._loss_ancestors and self._carries_gradient(self._types.get(name).dtype)
        ]
        return [
            *names,
            *(gradient + name for name in differentiable),
            *(updated + name for name in self._trained),
            *self._weights.state_ids,
            self._loss_scaling_id(),
            *(
                [FINAL_LOSS_SCALE_ID, UPDATE_FACTOR_ID]
                + ([STATISTICS_ID] if self.accumulationFactor > 1 else [])
                if self._options.automaticLossScalingSettings.enabled
                else []
            ),
        ]

    def _parse_reserved(self, tensor_id: str) -> ReservedTensor | None:
        return reserved_tensors.parse(
            tensor_id,
            self._options.automaticLossScalingSettings.enabled,
            self.accumulationFactor > 1,
        )

    def _loss_scaling_id(self) -> str:
        """`lossScaling_<TYPE>`, TYPE the loss's: the optimizer names it so before the
        original's EnsureFp32LossScale transform makes it float32 (it keeps the name)."""
        return reserved_tensors.loss_scaling_id(
            TensorSignature(self._loss_signature.dtype, ()).tensor_info().data_type()
        )

    def _tensor_signature(self, tensor_id: str) -> TensorSignature:
        reserved = self._parse_reserved(tensor_id)
        if reserved is None:
            return super()._tensor_signature(tensor_id)
        return self._reserved_signature(reserved)

    def _loss_scaling_signature(self) -> TensorSignature:
        """The loss scaling has the loss's type, or float32 with ensureFp32LossScaleTensor
        or automatic loss scaling (willow/src/ir.cpp applies EnsureFp32LossScale for both)."""
        dtype = self._loss_signature.dtype
        options = self._options
        if options.ensureFp32LossScaleTensor or options.automaticLossScalingSettings.enabled:
            dtype = tf.float32
        return TensorSignature(dtype, ())

    def _variable_signature(self, name: str) -> TensorSignature:
        value = self._weights.host[name]
        return TensorSignature(tf.as_dtype(value.dtype), self._weights.replica_shape(name))

    # -- the program ---------------------------------------------------------------------------

    def _place_variables(self) -> None:
        super()._place_variables()
        self._variables.place_on(self._device.host_device())

    def _build_program(self) -> LoopProgram:
        spec = TrainingSpec(
            program=self._spec,
            loss_id=self._loss_id,
            accumulation_factor=self.accumulationFactor,
            replication_factor=self.replicationFactor,
            reduction=self._options.accumulationAndReplicationReductionType,
            mean_strategy=self._options.meanAccumulationAndReplicationReductionStrategy,
            trained=tuple(self._trained),
            state_slots=dict(self._state_slots),
            accumulators=dict(self._accumulators),
            reserved_anchors=dict(self._reserved_anchors),
            statistics=dict(self._statistics),
            automatic_loss_scaling=self._automatic_loss_scaling,
            optimizer_tensors=dict(self._optimizer_tensors),
        )
        return build_training_program(
            spec, self._weights, self._variables, self._random, self._optimizer
        )

    def _forward_only_program(self) -> Callable[[dict[str, Any]], Any]:
        """The forward pass alone over every micro-batch of the step, with the weights as they
        are: no gradients, no update (willow/src/ir.cpp, createImplicitPipeliningFwdOnlyProgram
        separates the forward stages from the backward ones). Anchors it does not compute
        (gradients, optimizer state) come back as zeros."""
        if getattr(self, "_forward_only", None) is None:
            spec = dataclasses.replace(
                self._spec,
                batches_per_step=self._data_flow.batchesPerStep() * self.accumulationFactor,
                anchors=[p for p in self._anchors if p.tensor_id not in self._reserved_anchors],
                name=f"{self._name}_forward_only",
            )
            self._forward_only = build_program(spec, self._weights.program_values, self._random)
        program: LoopProgram = self._forward_only
        return program

    def _warm_up(self) -> None:
        """Compiles with a run on zeros, then puts every variable back as it was (a training
        step changes weights, optimizer state and counters)."""
        variables = [*self._weights.device.values(), *self._variables.all()]
        saved = [variable.numpy() for variable in variables]
        try:
            super()._warm_up()
        finally:
            for variable, value in zip(variables, saved, strict=True):
                variable.assign(value)

    def _check_can_run(self) -> None:
        if self._weights.weight_ids and not self._weights_from_host_called:
            raise popart_exception(
                "Must call weightsFromHost before run as the model has initializers and the "
                "session has been created in training mode"
            )

    # -- the original's training members -------------------------------------------------------

    def updateOptimizerFromHost(self, optimizer: Optimizer) -> None:  # noqa: N802
        """Takes the new optimizer's hyper-parameters (not its state). It must be of the same
        type and modes, with the same const values; non-const values may change."""
        new = check_instance(optimizer, Optimizer, "updateOptimizerFromHost optimizer")
        self._optimizer.check_replacement(new, self._trained)
        self._optimizer = new.copy()
        self._variables.update_from(self._optimizer)

    def connectStreamToCallback(  # noqa: N802
        self,
        streamHandle: str,  # noqa: N803
        callback: Callable[[np.ndarray], None],
        index: int = 0,
    ) -> None:
        """Calls `callback(buffer)` for each value a stream moves for replica `index`.

        `streamHandle` is an input's id (the callback fills the buffer the device reads; it
        holds the step IO's value, if any, when called) or an anchor's id (the callback reads
        what the device wrote). The buffer is only valid during the call, as on the hardware.
        """
        check_instance(streamHandle, str, "connectStreamToCallback streamHandle")
        if not callable(callback):
            raise OptionTypeError("connectStreamToCallback callback must be callable")
        index = check_int(index, "connectStreamToCallback index")
        if not 0 <= index < self.replicationFactor:
            raise popart_exception(
                f"connectStreamToCallback index {index}: the session has "
                f"{self.replicationFactor} replica(s)"
            )
        known = [plan.tensor_id for plan in self._inputs] + [
            plan.tensor_id for plan in self._anchors
        ]
        if streamHandle not in known:
            raise popart_exception(
                f"connectStreamToCallback: no stream '{streamHandle}' (the streams are the "
                f"inputs and anchors {known})"
            )
        self._streams.setdefault(streamHandle, []).append((index, callback))

    def broadcastWeights(self, rootRank: int = 0) -> None:  # noqa: N802, N803
        """Sends the host weights of PopRun instance `rootRank` to the other instances (as
        willow/src/session.cpp does with popdist's broadcast of each weight tensor)."""
        rank = check_int(rootRank, "broadcastWeights rootRank")
        # Imported here: the instances' collective runtime is only needed under PopRun.
        from openipu._src.distributed import host_collectives

        instances = host_collectives.world_size()
        if self._options.enableDistributedReplicatedGraphs:
            instances = max(
                instances,
                self._options.globalReplicationFactor // max(1, self.replicationFactor),
            )
        if not 0 <= rank < instances:
            raise popart_exception(
                f"broadcastWeights rootRank {rank}: there are {instances} PopRun instance(s)"
            )
        if host_collectives.world_size() == 1:
            return
        for name in [*self._weights.weight_ids, *self._weights.state_ids]:
            received = host_collectives.broadcast(self._weights.host[name], rank).numpy()
            self._weights.host[name] = received.reshape(self._weights.host[name].shape)

    def _extra_initializers(self) -> dict[str, np.ndarray]:
        """modelToHost writes the optimizer state too (not the accumulators, which are empty
        between runs), unless its streams are disabled."""
        if self._options.disableOptimizerStateTensorStreams:
            return {}
        current = self._weights.current()
        return {state_id: current[state_id] for state_id, _ in self._model_state_ids()}

    def _fingerprint_settings(self) -> dict[str, Any]:
        return {
            "loss": self._loss_id,
            "optimizer": repr(self._optimizer.structure()),
            "accumulationFactor": self.accumulationFactor,
            "reduction": self._options.accumulationAndReplicationReductionType.name,
        }

    # -- streams connected to callbacks ----------------------------------------------------------

    def _stacked_inputs(self, stepio: StepIO) -> dict[str, tf.Tensor]:
        if not self._streams:
            return super()._stacked_inputs(stepio)
        return super()._stacked_inputs(
            _CallbackInputs(stepio, self._streams, self.replicationFactor)
        )

    def _anchor_values(self, outputs: dict[str, tf.Tensor] | None) -> dict[str, np.ndarray]:
        values = super()._anchor_values(outputs)
        for plan in self._anchors:
            for index, callback in self._streams.get(plan.tensor_id, []):
                for buffer in _replica_values(
                    plan.per_batch(values[plan.tensor_id]), index, plan.replication_factor
                ):
                    view = np.array(buffer, copy=True)
                    view.flags.writeable = False
                    callback(view)
        return values


def _replica_values(values: list[np.ndarray], index: int, replicas: int) -> list[np.ndarray]:
    """Replica `index`'s values among a stream's values, which are in host order (micro-batch
    major, replica minor)."""
    return values[index::replicas]


class _CallbackInputs(StepIO):
    """A step IO whose inputs connected to callbacks are (re)filled by them."""

    def __init__(
        self,
        stepio: StepIO,
        streams: dict[str, list[tuple[int, Callable[[np.ndarray], object]]]],
        replicas: int,
    ) -> None:
        self._stepio = stepio
        self._streams = streams
        self._replicas = replicas

    def read_inputs(self, plans: list[InputPlan]) -> dict[str, np.ndarray]:
        from_callbacks = {plan.tensor_id for plan in plans if plan.tensor_id in self._streams}
        given = [
            plan
            for plan in plans
            if plan.tensor_id not in from_callbacks or _has_input(self._stepio, plan.tensor_id)
        ]
        arrays = self._stepio.read_inputs(given) if given else {}
        for plan in plans:
            if plan.tensor_id not in from_callbacks:
                continue
            values = arrays.get(plan.tensor_id)
            if values is None:
                values = np.zeros(plan.stacked_shape, plan.signature.numpy_dtype)
            values = np.array(values, copy=True)
            replicas = 1 if plan.broadcast else self._replicas
            for index, callback in self._streams[plan.tensor_id]:
                for position in range(index if replicas > 1 else 0, plan.fetches, replicas):
                    buffer = values[position]
                    callback(buffer)
            arrays[plan.tensor_id] = values
        return arrays

    def write_anchors(self, plans: list[AnchorPlan], values: dict[str, np.ndarray]) -> None:
        self._stepio.write_anchors(plans, values)


def _has_input(stepio: StepIO, tensor_id: str) -> bool:
    inputs = getattr(stepio, "_inputs", None)
    return inputs is None or tensor_id in inputs
