"""The program a session runs: `batchesPerStep` batches of the lowered graph per call.

It is an engine `LoopProgram` (the one device loop): the host passes every input of the run
stacked along a leading `batchesPerStep` axis, the step evaluates the lowered ONNX graph for
one batch with the weights read from their device variables, and the anchors of every batch
come back stacked (or only the last batch's, when every anchor is `Final`).

With synthetic data the step makes its own inputs (zeros or random values) and reads
nothing from the host, as the original does.

Batches of an inference step are independent: each reads its inputs and the weights, which
no batch changes, and draws its random numbers from its own seed (the step's first seed plus
the batch's index; the seed moves on by `batchesPerStep` after the step). So the program
declares its steps independent, and the engine runs the batches together instead of in a
loop: vectorized under XLA, unrolled when the engine picks a graph (convolutions). Programs
that must run as TensorFlow graphs because XLA cannot compile an op (host prints, aborts,
shapes computed from values, which may differ between batches) keep the loop.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass

import tensorflow as tf

from openipu._src.engine import replication
from openipu._src.engine.compile_policy import CompileMode
from openipu._src.engine.cost_model.cost_options import CostOptions
from openipu._src.engine.program import LoopProgram, compile_program
from openipu._src.engine.program_spec import ProgramSpec
from openipu._src.popart.dataflow import AnchorReturnTypeId
from openipu._src.popart.lowering import LoweredGraph
from openipu._src.popart.lowering.op import Op
from openipu._src.popart.lowering.tensor_utils import cast
from openipu._src.popart.options.enums import SyntheticDataMode
from openipu._src.popart.session.anchors import AnchorPlan
from openipu._src.popart.session.placement import Placement
from openipu._src.popart.session.random_state import RandomState
from openipu._src.popart.session.stepio import InputPlan


@dataclass(frozen=True)
class SessionProgramSpec:
    """Everything that decides a session's program (its engine `ProgramSpec` comes from it)."""

    lowered: LoweredGraph
    inputs: list[InputPlan]
    anchors: list[AnchorPlan]
    batches_per_step: int
    synthetic_data: SyntheticDataMode
    host_device: str
    ipu_ordinal: int
    replicas: int
    compile_mode: CompileMode | None
    name: str
    placement: Placement | None = None  # sharded and pipelined sessions: the ops' IPUs
    chip: CostOptions | None = None  # the device's chip, for the cost model (None: no chip)
    # SessionOptions.enableStochasticRounding: float16 results are rounded stochastically;
    # then, for each tensor of known type, whether it is float16 (None: rounded to nearest).
    stochastic_rounding: tuple[tuple[str, bool], ...] | None = None

    @property
    def op_scope(self) -> Callable[[Op], AbstractContextManager[object] | None] | None:
        return self.placement.op_scope if self.placement is not None else None

    @property
    def returns_last_batch_only(self) -> bool:
        return all(plan.art.id() is AnchorReturnTypeId.Final for plan in self.anchors)

    @property
    def steps_are_independent(self) -> bool:
        """Whether the batches of a step may run together (see the module's docstring).

        A program rebuilt as a graph after XLA failed (a shape computed from a streamed
        value, which may differ between batches) keeps the loop too.
        """
        return self.lowered.compilable and self.compile_mode is not CompileMode.GRAPH

    @property
    def device_anchors(self) -> list[AnchorPlan]:
        """The anchors the device returns: an empty tensor's value is known without running
        (and TensorFlow's host queues crash on empty elements)."""
        return [plan for plan in self.anchors if plan.signature.nelms > 0]


def build_program(
    spec: SessionProgramSpec,
    initializer_values: Callable[[], Mapping[str, tf.Tensor | tf.Variable]],
    random_state: RandomState,
) -> LoopProgram:
    """`initializer_values()` gives, inside the step, the values of the initializers that are
    not compiled in (the weights' variables)."""
    outputs = set(spec.lowered.output_names)
    anchor_ids = dict.fromkeys(plan.tensor_id for plan in spec.anchors)
    fetch = [name for name in anchor_ids if name not in outputs]

    together = spec.steps_are_independent
    # The weights' values read in each graph being built, by replica (replicas read
    # their own copies): steps that run unrolled share one read of each weight, and so one
    # copy of what is computed from it alone (a convolution kernel's transpose), which
    # TensorFlow's common subexpression elimination then merges.
    reads: weakref.WeakKeyDictionary[tf.Graph, dict[int, dict[str, tf.Tensor]]] = (
        weakref.WeakKeyDictionary()
    )

    def read_weights() -> dict[str, tf.Tensor]:
        in_graph = reads.setdefault(tf.compat.v1.get_default_graph(), {})
        slot = replication.current_replica_index()
        if slot not in in_graph:
            in_graph[slot] = {
                name: tf.convert_to_tensor(value) for name, value in initializer_values().items()
            }
        return in_graph[slot]

    def step(
        element: dict[str, tf.Tensor], index: tf.Tensor | None = None
    ) -> dict[str, tf.Tensor] | None:
        seed = random_state.batch_seed_at(index) if together else random_state.batch_seed()
        if spec.synthetic_data is SyntheticDataMode.Off:
            inputs = element
        else:
            inputs = synthetic_inputs(spec.inputs, spec.synthetic_data, seed)
        weights = read_weights()
        rounding = spec.stochastic_rounding
        rounding_seed = (
            random_state.rounding_seed(index if together else None) if rounding else None
        )
        results = spec.lowered.run(
            inputs,
            weights,
            training=False,
            seed=seed,
            fetch=fetch,
            op_scope=spec.op_scope,
            rounding_seed=rounding_seed,
            tensor_is_half=dict(rounding) if rounding else None,
        )
        # Shapes the model declares hold even where ops leave them open (data-dependent).
        returned = {
            plan.tensor_id: tf.ensure_shape(
                cast(results[plan.tensor_id], plan.signature.transfer_dtype),
                plan.signature.shape,
            )
            for plan in spec.device_anchors
        }
        return returned or None

    return compile_program(
        ProgramSpec(
            step,
            spec.batches_per_step,
            device_ordinal=spec.ipu_ordinal,
            host_device=spec.host_device,
            replicas=spec.replicas,
            outputs="last" if spec.returns_last_batch_only else "all",
            executor=spec.compile_mode,
            indexed=together,
            independent_steps=together,
            group_size=spec.batches_per_step if together else 1,
            after_group=(lambda: random_state.advance(spec.batches_per_step)) if together else None,
            name=spec.name,
            chip=spec.chip,
            check_memory=spec.chip is not None,
        )
    )


def synthetic_inputs(
    plans: list[InputPlan], mode: SyntheticDataMode, seed: tf.Tensor
) -> dict[str, tf.Tensor]:
    inputs = {}
    for index, plan in enumerate(plans):
        dtype = plan.signature.dtype
        shape = plan.stacked_shape[1:]
        input_seed = tf.random.experimental.stateless_fold_in(seed, index)
        if mode is SyntheticDataMode.Zeros:
            inputs[plan.tensor_id] = tf.zeros(shape, dtype)
        elif not dtype.is_floating:
            inputs[plan.tensor_id] = _synthetic_integers(shape, dtype, mode, input_seed)
        elif mode is SyntheticDataMode.RandomNormal:
            inputs[plan.tensor_id] = tf.random.stateless_normal(shape, input_seed, dtype=dtype)
        else:
            inputs[plan.tensor_id] = tf.random.stateless_uniform(shape, input_seed, dtype=dtype)
    return inputs


def _synthetic_integers(
    shape: list[int], dtype: tf.DType, mode: SyntheticDataMode, seed: tf.Tensor
) -> tf.Tensor:
    """The original's synthetic integers and booleans (willow/src/ir.cpp): uniform over the
    whole range of the type, or standard normal values converted to it."""
    if mode is SyntheticDataMode.RandomNormal:
        return tf.cast(tf.random.stateless_normal(shape, seed), dtype)
    if dtype == tf.bool:
        low, high = 0, 2
    else:
        low, high = int(dtype.min), int(dtype.max) + 1
    # Drawn as int64 (covering uint32's range), then narrowed.
    values = tf.random.stateless_uniform(shape, seed, minval=low, maxval=high, dtype=tf.int64)
    return tf.cast(values, dtype)
