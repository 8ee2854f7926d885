"""The program a training session runs: forward, backward and update for every micro-batch.

It is an engine `LoopProgram` of `batchesPerStep * accumulationFactor` steps per call (in
groups of `accumulationFactor`), run by every replica. One step, on one replica:

1. the lowered ONNX graph runs forward (training mode: dropout, batch statistics) under a
   `tf.GradientTape`, with the weights read from their device variables;
2. TensorFlow's autodiff gives the gradients of the loss, seeded with the loss scaling, for
   every trained weight (and for tensors whose gradients are anchored);
3. without gradient accumulation, the weights are updated at once (below); with it, the
   engine's gradient accumulation (`engine.gradient_accumulation`) adds the gradients to the
   `Accum___<w>` accumulators (a sum, or a running mean), and the update runs after the
   group's last step (`after_group`), from the accumulators, which it then clears;
4. the anchors of the step go to the outfeed: forward tensors, gradients, and the weights,
   optimizer state and loss scaling after the step.

The update: gradients are summed over the replicas (all-reduce; a weight grouped by its
VariableSettings over its group's replicas only, `grouped_weights.py`), divided by the
accumulation factor and the replication factor where the reduction type is Mean
(`accumulationAndReplicationReductionType`; a running mean needs no division by the factor),
clipped by the optimizer's clip norms, and handed with each weight's state and
hyper-parameters to the optimizer's `apply`. Weights and state are computed in float32 and
stored in their own types. Batch normalizations update their running statistics in every
step, as the original's do (each replica its own copy).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from openipu._src.engine.gradient_accumulation import (
    AccumulatorStore,
    GradientAccumulation,
    GradientAccumulationReductionMethod,
)
from openipu._src.engine.program import LoopProgram, compile_program
from openipu._src.engine.program_spec import ProgramSpec
from openipu._src.popart.builder.enums import ReductionType
from openipu._src.popart.lowering.tensor_utils import cast
from openipu._src.popart.optimizers.clip_norm import clip_factors
from openipu._src.popart.optimizers.optimizer import Optimizer, Value, WeightUpdate
from openipu._src.popart.options.enums import MeanReductionStrategy, SyntheticDataMode
from openipu._src.popart.session import grouped_weights
from openipu._src.popart.session.loss_scaling import AutomaticLossScaling
from openipu._src.popart.session.random_state import RandomState
from openipu._src.popart.session.replicas import Replicas
from openipu._src.popart.session.reserved_tensors import ReservedKind, ReservedTensor
from openipu._src.popart.session.sgd0_tensors import Sgd0Tensor
from openipu._src.popart.session.step_program import SessionProgramSpec, synthetic_inputs
from openipu._src.popart.session.training_variables import TrainingVariables
from openipu._src.popart.session.weights import WeightStore


@dataclass(frozen=True)
class TrainingSpec:
    """What decides a training program besides the forward program's spec."""

    program: SessionProgramSpec
    loss_id: str
    accumulation_factor: int
    replication_factor: int
    reduction: ReductionType
    mean_strategy: MeanReductionStrategy
    trained: tuple[str, ...]  # weights the optimizer updates
    state_slots: dict[str, tuple[str, ...]]  # weight -> its optimizer-state tensor ids
    accumulators: dict[str, str]  # weight -> its accumulator's tensor id (with accumulation)
    reserved_anchors: dict[str, ReservedTensor]  # anchor id -> what it is
    statistics: dict[str, str]  # batch-norm statistic, CopyVarUpdate target -> its new value
    automatic_loss_scaling: AutomaticLossScaling | None
    optimizer_tensors: dict[str, Sgd0Tensor]  # anchored optimizer tensors (sgd0_tensors.py)

    @property
    def accumulating(self) -> bool:
        return self.accumulation_factor > 1

    @property
    def running_mean(self) -> bool:
        return (
            self.reduction is ReductionType.Mean
            and self.mean_strategy is MeanReductionStrategy.Running
        )


def build_training_program(
    spec: TrainingSpec,
    weights: WeightStore,
    variables: TrainingVariables,
    random_state: RandomState,
    optimizer: Optimizer,
) -> LoopProgram:
    steps = _TrainingSteps(spec, weights, variables, random_state, optimizer)
    program = spec.program
    return compile_program(
        ProgramSpec(
            steps.step,
            program.batches_per_step * spec.accumulation_factor,
            device_ordinal=program.ipu_ordinal,
            host_device=program.host_device,
            replicas=program.replicas,
            outputs="last" if program.returns_last_batch_only else "all",
            executor=program.compile_mode,
            group_size=spec.accumulation_factor,
            after_group=steps.after_group if spec.accumulating else None,
            name=program.name,
            chip=program.chip,
            check_memory=program.chip is not None,
        )
    )


class _TrainingSteps:
    def __init__(
        self,
        spec: TrainingSpec,
        weights: WeightStore,
        variables: TrainingVariables,
        random_state: RandomState,
        optimizer: Optimizer,
    ) -> None:
        self._spec = spec
        self._weights = weights
        self._variables = variables
        self._random = random_state
        self._optimizer = optimizer
        # PopART keeps the accumulators as the session's `Accum___<w>` tensors; a running
        # mean (reduction Mean, strategy Running) accumulates so, any other a sum (a Mean
        # divides it in the update).
        self._accumulation: GradientAccumulation[str] = GradientAccumulation(
            spec.accumulation_factor,
            GradientAccumulationReductionMethod.RUNNING_MEAN
            if spec.running_mean
            else GradientAccumulationReductionMethod.SUM,
            AccumulatorStore("accumulated_micro_batches"),
            accumulator_for=lambda name: weights.device[spec.accumulators[name]],
            counter_device=spec.program.host_device,
        )
        reserved = spec.reserved_anchors.values()
        targets = [r.base for r in reserved if r.kind is ReservedKind.GRADIENT]
        if spec.automatic_loss_scaling is not None:
            # The gradients automatic loss scaling tracks (weights' ones are there anyway).
            targets += [n for n in spec.automatic_loss_scaling.tracked if n not in spec.trained]
        self._gradient_targets = list(dict.fromkeys(targets))

    # -- one micro-batch ---------------------------------------------------------------------

    def step(self, element: dict[str, tf.Tensor]) -> dict[str, tf.Tensor] | None:
        spec, program = self._spec, self._spec.program
        seed = self._random.batch_seed()
        if program.synthetic_data is SyntheticDataMode.Off:
            inputs = element
        else:
            inputs = synthetic_inputs(program.inputs, program.synthetic_data, seed)
        values = self._weights.program_values()
        trained = {name: tf.convert_to_tensor(values[name]) for name in spec.trained}
        values.update(trained)
        inputs = {name: tf.convert_to_tensor(value) for name, value in inputs.items()}
        fetch = self._fetch()
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(list(trained.values()))
            # The inputs are watched whenever a gradient is asked for: an intermediate
            # tensor's gradient (anchored `Gradient___<id>`) is recorded only along
            # watched paths, and a model may have no weights before it.
            if self._gradient_targets:
                tape.watch([v for v in inputs.values() if v.dtype.is_floating])
            rounding = program.stochastic_rounding
            rounding_seed = self._random.rounding_seed() if rounding else None
            results = program.lowered.run(
                inputs,
                values,
                training=True,
                seed=seed,
                fetch=fetch,
                op_scope=program.op_scope,
                rounding_seed=rounding_seed,
                tensor_is_half=dict(rounding) if rounding else None,
            )
        known = {**inputs, **values, **results}
        loss = known[spec.loss_id]
        loss_scaling = self._variables.final_loss_scaling_value()
        targets = dict(trained)
        targets.update({name: known[name] for name in self._gradient_targets})
        placed = program.placement.backward() if program.placement else contextlib.nullcontext()
        if loss.dtype.is_integer:
            gradients = self._integer_loss_gradients(inputs, values, targets, seed, loss_scaling)
        else:
            with placed:
                gradients = tape.gradient(
                    loss,
                    targets,
                    output_gradients=tf.fill(tf.shape(loss), tf.cast(loss_scaling, loss.dtype)),
                )
        operations = self._update_statistics(known)
        trained_gradients = {
            name: gradients[name] for name in spec.trained if gradients[name] is not None
        }
        counts = self._histogram(gradients)
        if spec.accumulating:
            operations += self._accumulate(trained_gradients)
            if counts is not None:
                assert self._variables.statistics is not None
                operations.append(self._variables.statistics.assign_add(counts))
        else:
            operations += self._update(trained_gradients, counts=counts)
        with tf.control_dependencies(operations):
            return self._anchors(known, gradients, loss_scaling) or None

    def _integer_loss_gradients(
        self,
        inputs: dict[str, tf.Tensor],
        values: dict[str, Any],
        targets: dict[str, tf.Tensor],
        seed: tf.Tensor,
        loss_scaling: tf.Tensor,
    ) -> dict[str, tf.Tensor | None]:
        """The gradients of an integer loss, in the targets' types, as the original's grad
        ops give them in the loss's type (operators_test/reducemedian_test.py). TensorFlow's
        autodiff records no integer ops, so the graph is run again on float32 copies of its
        integer inputs (exact for integers below 2**24) and differentiated; a model that
        needs integer inputs as integers (indices, shapes) has no such gradients."""
        program = self._spec.program
        wide = {n: tf.cast(v, tf.float32) if v.dtype.is_integer else v for n, v in inputs.items()}
        trained = {name: tf.convert_to_tensor(values[name]) for name in self._spec.trained}
        lowered = program.lowered
        fetch = [
            name
            for name in [self._spec.loss_id, *targets]
            if name not in wide
            and name not in lowered.initializers
            and name not in lowered.output_names
        ]
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch([v for v in [*wide.values(), *trained.values()] if v.dtype.is_floating])
            results = lowered.run(
                wide,
                {**values, **trained},
                training=True,
                seed=seed,
                fetch=fetch,
                op_scope=program.op_scope,
            )
        known = {**wide, **trained, **results}
        loss = tf.cast(known[self._spec.loss_id], tf.float32)
        gradients = tape.gradient(
            loss,
            {name: known[name] for name in targets},
            output_gradients=tf.fill(tf.shape(loss), tf.cast(loss_scaling, tf.float32)),
        )
        return {
            name: None if gradient is None else tf.cast(gradient, targets[name].dtype)
            for name, gradient in gradients.items()
        }

    def _histogram(self, gradients: dict[str, tf.Tensor | None]) -> tf.Tensor | None:
        """This micro-batch's histogram counts of the gradients automatic loss scaling
        tracks (on this replica), or None without it."""
        automatic = self._spec.automatic_loss_scaling
        if automatic is None:
            return None
        tracked = [gradients[name] for name in automatic.tracked]
        present = [gradient for gradient in tracked if gradient is not None]
        if not present:
            return tf.zeros([2], tf.float32)
        return automatic.histogram(present)

    def _fetch(self) -> list[str]:
        spec, program = self._spec, self._spec.program
        outputs = set(program.lowered.output_names)
        wanted = [spec.loss_id, *self._gradient_targets, *spec.statistics.values()]
        if spec.automatic_loss_scaling is not None:
            wanted += spec.automatic_loss_scaling.tracked
        wanted += [
            r.base for r in spec.reserved_anchors.values() if r.kind is ReservedKind.RESTORED
        ]
        wanted += [
            plan.tensor_id
            for plan in program.anchors
            if plan.tensor_id not in spec.reserved_anchors
            and plan.tensor_id not in spec.optimizer_tensors
        ]
        initializers = set(program.lowered.initializers)
        inputs = set(program.lowered.input_names)
        return list(dict.fromkeys(
            n for n in wanted if n not in outputs and n not in initializers and n not in inputs
        ))  # fmt: skip

    def _update_statistics(self, known: dict[str, tf.Tensor]) -> list[object]:
        return [
            self._weights.assign(statistic, known[output])
            for statistic, output in self._spec.statistics.items()
        ]

    def _accumulate(self, gradients: dict[str, tf.Tensor]) -> list[object]:
        # Every trained weight is updated after the group, from its accumulator (zero where
        # no micro-batch had a gradient for it).
        pairs = [
            (gradients[name] if name in gradients else tf.zeros_like(self._weights.read(name)),
             name)
            for name in self._spec.trained
        ]  # fmt: skip
        return [self._accumulation.add(pairs)]

    # -- after a group of micro-batches (gradient accumulation) ----------------------------------

    def after_group(self) -> tf.Operation:
        def update(accumulated: list[tuple[tf.Tensor, str]]) -> list[object]:
            statistics = self._variables.statistics
            counts = None if statistics is None else statistics.read_value()
            operations = self._update(
                {name: value for value, name in accumulated}, accumulated=True, counts=counts
            )
            if statistics is not None:
                with tf.control_dependencies(operations):
                    operations.append(statistics.assign(tf.zeros_like(statistics)))
            return operations

        return self._accumulation.apply_and_restart(update)

    # -- the weight update ----------------------------------------------------------------------

    def _update(
        self,
        gradients: dict[str, tf.Tensor],
        accumulated: bool = False,
        counts: tf.Tensor | None = None,
    ) -> list[object]:
        spec = self._spec
        names = list(gradients)
        # A grouped weight's gradients are summed over its group's replicas only.
        grouped = {n: self._weights.grouped[n] for n in names if n in self._weights.grouped}
        grouped = {n: variable for n, variable in grouped.items() if variable.split}
        shared = [n for n in names if n not in grouped]
        reduced = dict(
            zip(shared, Replicas.all_reduce_sum([gradients[n] for n in shared]), strict=True)
        )
        for name, variable in grouped.items():
            reduced[name] = grouped_weights.sum_within_groups(gradients[name], variable)
        divisor = 1.0
        if spec.reduction is ReductionType.Mean:
            if accumulated and not spec.running_mean:
                divisor *= spec.accumulation_factor
            divisor *= spec.replication_factor
        loss_scaling = self._variables.final_loss_scaling_value()
        scaled = {n: tf.cast(g, tf.float32) / divisor for n, g in reduced.items()}
        factors = clip_factors(
            self._optimizer.clip_norm_settings, {n: g / loss_scaling for n, g in scaled.items()}
        )
        read = self._variables.reader()
        weights = self._weights
        operations = []
        for name in names:
            gradient = scaled[name] * factors[name] if name in factors else scaled[name]
            state_ids = spec.state_slots.get(name, ())
            prefixes = [state_id[: -len(name)] for state_id in state_ids]
            state = {
                prefix: tf.cast(weights.read(state_id), tf.float32)
                for prefix, state_id in zip(prefixes, state_ids, strict=True)
            }
            new_weight, new_state = self._optimizer.apply(
                WeightUpdate(
                    name,
                    tf.cast(weights.read(name), tf.float32),
                    gradient,
                    state,
                    functools.partial(_hyper_parameter, read, weight_id=name),
                    loss_scaling,
                )
            )
            operations.append(weights.assign(name, new_weight))
            for prefix, state_id in zip(prefixes, state_ids, strict=True):
                operations.append(weights.assign(state_id, new_state[prefix]))
        if counts is not None:
            with tf.control_dependencies(operations):
                operations.append(self._rescale_loss(counts))
        return operations

    def _rescale_loss(self, counts: tf.Tensor) -> tf.Operation:
        """Automatic loss scaling's update of its factor, from the counts of every replica
        (the original all-reduces them)."""
        automatic = self._spec.automatic_loss_scaling
        updates, factor = self._variables.updates, self._variables.update_factor
        # Automatic loss scaling: the session made both variables (training_variables.py).
        assert automatic is not None and updates is not None and factor is not None
        (total,) = Replicas.all_reduce_sum([counts])
        done = updates.read_value()
        with tf.control_dependencies([done]):
            assigned = factor.assign(automatic.next_factor(factor.read_value(), total, done))
        with tf.control_dependencies([assigned]):
            return updates.assign_add(1)

    # -- anchors --------------------------------------------------------------------------------

    def _post_mean_divisor(self) -> float:
        """What SGD's scaled learning rate divides by: the accumulation and replication
        factors of a Mean reduction taken after accumulating (MeanReductionStrategy.Post)."""
        spec = self._spec
        if spec.reduction is not ReductionType.Mean or spec.running_mean:
            return 1.0
        return float(spec.accumulation_factor * spec.replication_factor)

    def _anchors(
        self,
        known: dict[str, tf.Tensor],
        gradients: dict[str, tf.Tensor | None],
        loss_scaling: object,
    ) -> dict[str, tf.Tensor]:
        anchors = {}
        read = self._variables.reader()
        for plan in self._spec.program.device_anchors:
            reserved = self._spec.reserved_anchors.get(plan.tensor_id)
            optimizer_tensor = self._spec.optimizer_tensors.get(plan.tensor_id)
            if optimizer_tensor is not None:
                value = optimizer_tensor.value(read, self._variables.loss_scaling_value())
            elif reserved is None and plan.tensor_id in self._spec.trained:
                # An anchored weight is copied to the host at the end of the step, after
                # its update, as the original's tests expect of it (operators_test/
                # detach_test.py, decompose_gradient_summation_test.py).
                value = self._weights.read(plan.tensor_id)
            elif reserved is None:
                value = known[plan.tensor_id]
            elif reserved.kind is ReservedKind.GRADIENT:
                value = gradients[reserved.base]
                if value is None:
                    # The session checked that the loss's gradient reaches it: only ops whose
                    # gradient is zero (Ceil, Floor, Round...) lie between, and PopART's
                    # UnaryZeroGradOp gives zeros (willow/src/op/onewayunary.cpp).
                    value = tf.zeros_like(known[reserved.base])
            elif reserved.kind is ReservedKind.LOSS_SCALING:
                value = tf.convert_to_tensor(self._variables.loss_scaling_value())
            elif reserved.kind is ReservedKind.FINAL_LOSS_SCALE:
                value = tf.convert_to_tensor(loss_scaling)
            elif reserved.kind is ReservedKind.LOSS_SCALE_UPDATE_FACTOR:
                assert self._variables.update_factor is not None
                value = self._variables.update_factor.read_value()
            elif reserved.kind is ReservedKind.LOSS_SCALE_STATISTICS:
                assert self._variables.statistics is not None
                value = self._variables.statistics.read_value()
            elif reserved.kind is ReservedKind.RESTORED:
                value = known[reserved.base]
            else:  # a variable: weights after the update, optimizer state, accumulators
                value = self._weights.read(reserved.variable_id)
            anchors[plan.tensor_id] = tf.ensure_shape(
                cast(value, plan.signature.transfer_dtype), plan.signature.shape
            )
        return anchors


def _hyper_parameter(read: Callable[[str, str], Value], key: str, weight_id: str) -> Value:
    """A weight's value of hyper-parameter `key` (what `WeightUpdate.hyper` gives)."""
    return read(key, weight_id)
