"""Building an executable from a function: trace it once, freeze it, record the decisions.

The function is the original's `application_compile_op` argument: it may run a device
loop over an infeed whose body enqueues to outfeeds (what serving exports), or simply
return tensors. Its device loop is captured (`stream_capture`) and becomes the program's
steps: one call of the executable runs the loop's `iterations` steps over that many
stacked infeed elements and returns every step's enqueued tensors, stacked. The traced
program is frozen (`program_graph`) and the engine's compile policy picks its executor,
as for any region; the decisions are the executable's `CompiledProgram`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework import func_graph as func_graph_module
from tensorflow.python.framework import ops
from tensorflow.python.ops import resource_variable_ops
from tensorflow.python.util import nest

from openipu._src.engine import (
    compile_policy,
    device_loop,
    engine_variables,
    floating_point_checks,
    traced_python,
    variable_reuse,
)
from openipu._src.engine.compiled_program import CompiledProgram, StepSchedule
from openipu._src.engine.executable import (
    iterator_loops,
    poplar_limits,
    program_graph,
    program_state,
    run_steps,
    stream_capture,
)
from openipu._src.engine.executable.executable_file import Executable
from openipu._src.engine.executable.signature import StreamSignature, TensorSignature
from openipu._src.engine.value_types import Nested
from openipu._src.system import configure

Argument: TypeAlias = np.ndarray | tf.TensorSpec
"""One of the function's inputs: a value baked into the program, or a start-up input."""


class _Streams:
    """What the first trace found: the loop's length and element, what a step enqueues,
    and what the function returns."""

    def __init__(self) -> None:
        self.iterations = 1
        self.can_stall = False  # a pipeline: a run always runs all its steps
        self.reads_per_step = 1  # streamed elements a step reads
        self.element_spec: Nested = None  # None: the function has no infeed loop
        self.step_output_specs: list[tf.TensorSpec] = []  # what the loop's step enqueues
        self.top_level_output_specs: list[tf.TensorSpec] = []  # enqueued outside the loop
        self.returned_specs: list[tf.TensorSpec] = []

    @property
    def flat_element_spec(self) -> list[tf.TensorSpec]:
        return [] if self.element_spec is None else list(nest.flatten(self.element_spec))

    @property
    def streamed_output_specs(self) -> list[tf.TensorSpec]:
        return self.step_output_specs + self.top_level_output_specs


@dataclasses.dataclass
class Traced:
    """A function traced for an executable, to freeze (`finish`) when its values are known."""

    concrete: Any  # the program's ConcreteFunction
    streams: _Streams
    startup_signatures: list[TensorSignature]
    fp_bits: frozenset[str]
    name: str

    def captured_values(self) -> list[tuple[int, tf.Tensor]]:
        """What the program captures from outside, as (key of `finish`'s `given`, a tensor
        of its value where the function was traced: a variable's value is read)."""
        variables = {id(v.handle): v for v in self.concrete.graph.variables}
        values = []
        for external, _ in self.concrete.graph.captures:
            variable = variables.get(id(external))
            if variable is not None:
                values.append((id(external), variable.read_value()))
            elif external.dtype != tf.resource:
                values.append((id(external), external))
        return values


def trace(func: Callable[..., Nested], arguments: Sequence[Argument], name: str) -> Traced:
    """Traces `func(*arguments)` for an executable (see the module docstring).

    As the original's op (ops/application_compile_op.py: `constant_indices`), arguments
    with a value are baked into the program; the others (`tf.TensorSpec`s: a TF1 graph's
    placeholders) are the executable's start-up inputs, in order.
    """
    python_function = traced_python.python_to_trace(func)  # a tf.function traces anew
    startup_signatures = [
        TensorSignature.of(f"input_{i}", spec)
        for i, spec in enumerate(a for a in arguments if isinstance(a, tf.TensorSpec))
    ]
    specs = [s.spec() for s in startup_signatures]

    lift_variables = not tf.executing_eagerly()

    def call(startup: Sequence[tf.Tensor]) -> Nested:
        given = iter(startup)
        args = [next(given) if isinstance(a, tf.TensorSpec) else tf.constant(a) for a in arguments]
        if not lift_variables:
            return python_function(*args)
        with tf.variable_creator_scope(_in_outer_graph):
            return python_function(*args)

    streams = _Streams()
    # Traced twice: first to learn the streams' specs (the program's inputs), then the
    # program. What the first trace creates is not the program's (see `_variables_of`).
    before = _variable_collections()
    numbering = None if tf.executing_eagerly() else variable_reuse.ScopeNumbering()
    tf.function(lambda *args: _probe(lambda: call(args), streams)).get_concrete_function(*specs)
    probed = _created_since(before)
    stream_specs = [
        tf.TensorSpec([streams.iterations * streams.reads_per_step, *s.shape], s.dtype)
        for s in streams.flat_element_spec
    ]

    def program(*args: tf.Tensor) -> list[tf.Tensor]:
        with variable_reuse.finding_variables_again(numbering=numbering):
            return _program(lambda: call(args[: len(specs)]), args[len(specs) :], streams)

    # The IPU's floating-point exception traps, as a region of this system has them; the
    # checks run on the host, so the program runs as a graph.
    fp_bits = floating_point_checks.configured_bits() | floating_point_checks.requested_bits()
    with floating_point_checks.checking(fp_bits, saturate=floating_point_checks.saturates_half()):
        concrete = tf.function(program).get_concrete_function(*specs, *stream_specs)
    _drop_unused(probed, concrete)
    return Traced(concrete, streams, startup_signatures, fp_bits, name)


def build(
    func: Callable[..., Nested],
    inputs: Sequence[Any],
    name: str,
    freeze_variables: bool,
    kind: str = "application",
    metadata: dict[str, Any] | None = None,
) -> Executable:
    """The executable of `func(*inputs)`, traced and frozen now (eagerly: the inputs'
    values are baked into it, as the original's op bakes eager tensors)."""
    arguments = [np.asarray(tf.convert_to_tensor(value)) for value in inputs]
    return finish(trace(func, arguments, name), freeze_variables, kind, metadata)


def finish(
    traced: Traced,
    freeze_variables: bool,
    kind: str = "application",
    metadata: dict[str, Any] | None = None,
    given: dict[int, np.ndarray] | None = None,
) -> Executable:
    """The executable of a traced function, its captures' values read now or `given`
    (keyed as `Traced.captured_values`)."""
    concrete, streams, startup_signatures = (
        traced.concrete,
        traced.streams,
        traced.startup_signatures,
    )
    fp_bits, name = traced.fp_bits, traced.name
    captured = program_graph.captured_variables(concrete)
    # The engine's own variables (a training pipeline's gradient accumulators) are the
    # program's state, kept by the runner: the original's executable holds them on the
    # chip, not in its signature.
    state = [v for v, _ in captured if engine_variables.is_engine_state(v)]
    variables = [(v, t) for v, t in captured if not engine_variables.is_engine_state(v)]
    if freeze_variables:
        _refuse_writes_to_frozen(concrete)
    frozen = program_graph.freeze(
        concrete, variables_as_inputs=not freeze_variables, given=given, state=state
    )
    if not freeze_variables and variables:
        # The graph's inputs in the order a run gives them: the start-up inputs, the
        # variables (their values given at start-up), the streams, then the state.
        names = frozen.inputs[: len(frozen.inputs) - len(state)]
        first, rest = len(startup_signatures), len(names) - len(variables)
        frozen = dataclasses.replace(
            frozen,
            inputs=(
                *names[:first],
                *names[rest:],
                *names[first:rest],
                *frozen.inputs[len(names) :],
            ),
        )
    metadata = dict(metadata or {})
    if any(node.name == run_steps.NAME for node in _graph_def(frozen).node):
        frozen = dataclasses.replace(frozen, inputs=(*frozen.inputs, f"{run_steps.NAME}:0"))
        metadata[run_steps.METADATA_KEY] = True
    if streams.can_stall:
        metadata[run_steps.CAN_STALL_KEY] = True
    if streams.reads_per_step != 1:
        metadata[run_steps.READS_PER_STEP_KEY] = streams.reads_per_step
    graph = concrete.graph
    poplar_limits.check(
        graph, name, bool(streams.flat_element_spec or streams.streamed_output_specs)
    )
    executor = compile_policy.choose_mode(graph, graph.get_operations())
    if fp_bits:
        executor = compile_policy.CompileMode.GRAPH
    system = configure.maybe_current_system()
    record = CompiledProgram(
        name=name,
        executor=executor,
        host_device=system.device(0).host_device() if system else "/device:CPU:0",
        ipu_ordinal=0,
        replicas=1,
        ipus_per_replica=1,
        steps_per_call=streams.iterations,
        step_schedule=StepSchedule.LOOP,
    )
    variable_inputs = []
    updated: list[TensorSignature] = []
    if not freeze_variables:
        # Named as the original names a resource argument of its executable
        # (tests/application_runtime_test.py feeds 'XLA_Args/d1/weight').
        variable_inputs = [
            TensorSignature.of(f"XLA_Args/{variable.name.split(':')[0]}", variable)
            for variable, _ in variables
        ]
        # The original's executable gives a variable it writes back as an output (its
        # application_compile_test.py counts them); a call gives only streams.
        updated = [
            TensorSignature.of(f"XLA_Retvals/{variable.name.split(':')[0]}", variable)
            for variable in program_graph.updated_variables(concrete)
            if not engine_variables.is_engine_state(variable)
        ]
    signature = StreamSignature(
        inputs=(*startup_signatures, *variable_inputs),
        streamed_inputs=tuple(
            TensorSignature.of(_spec_name(spec, f"input_{i}"), spec)
            for i, spec in enumerate(streams.flat_element_spec)
        ),
        streamed_outputs=tuple(
            TensorSignature.of(f"output_{i}", spec)
            for i, spec in enumerate(streams.streamed_output_specs)
        ),
        outputs=(
            *(
                TensorSignature.of(f"result_{i}", spec)
                for i, spec in enumerate(streams.returned_specs)
            ),
            *updated,
        ),
    )
    if variable_inputs:
        # Which start-up inputs a run holds in variables of its own (updated run to run).
        first = len(startup_signatures)
        metadata["variable_inputs"] = list(range(first, first + len(variable_inputs)))
    if fp_bits:
        metadata["floating_point_checks"] = sorted(fp_bits)
    sections = {}
    if state:
        sections[program_state.SECTION] = program_state.to_bytes(
            [_value_of(v, given) for v in state]
        )
    return Executable(kind, record, signature, frozen, sections=sections, metadata=metadata)


def _value_of(variable: tf.Variable, given: dict[int, np.ndarray] | None) -> np.ndarray:
    """A variable's value now: given (a TF1 graph's, read in its session) or read eagerly."""
    if given is not None and id(variable.handle) in given:
        return np.asarray(given[id(variable.handle)])
    return np.asarray(variable.numpy())


def _spec_name(spec: tf.TensorSpec, default: str) -> str:
    return str(getattr(spec, "name", None) or default)


def _in_outer_graph(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
    """A TF1 program's function creates its variables in the program's graph, as the
    original's op (its function graph captures them from outside), not in the traced
    function (where tf.function allows a variable only on its first trace)."""
    del next_creator
    with ops.init_scope():
        return resource_variable_ops.ResourceVariable(
            **{k: v for k, v in kwargs.items() if k in _RESOURCE_VARIABLE_ARGUMENTS}
        )


_RESOURCE_VARIABLE_ARGUMENTS = frozenset(
    (
        "initial_value",
        "trainable",
        "collections",
        "validate_shape",
        "caching_device",
        "name",
        "dtype",
        "constraint",
        "distribute_strategy",
        "synchronization",
        "aggregation",
        "shape",
    )
)


_COLLECTIONS = (ops.GraphKeys.GLOBAL_VARIABLES, ops.GraphKeys.TRAINABLE_VARIABLES)


def _variable_collections() -> dict[str, list[Any]] | None:
    """A TF1 graph's variable collections now (None eagerly: there are none)."""
    graph = ops.get_default_graph()
    if tf.executing_eagerly() or isinstance(graph, func_graph_module.FuncGraph):
        return None
    return {key: list(graph.get_collection(key)) for key in _COLLECTIONS}


def _created_since(before: dict[str, list[Any]] | None) -> list[tuple[str, Any]]:
    if before is None:
        return []
    graph = ops.get_default_graph()
    return [
        (key, variable)
        for key in _COLLECTIONS
        for variable in graph.get_collection(key)
        if all(variable is not b for b in before[key])
    ]


def _drop_unused(probed: list[tuple[str, Any]], concrete: Any) -> None:
    """The first trace's variables that the program does not use leave the TF1 graph's
    collections, so that `global_variables()` lists the program's own, as the original's
    one trace leaves them (TF1 `get_variable` variables are found again by the program's
    trace, which reuses its scope's variables, and stay)."""
    graph = ops.get_default_graph()
    used = {id(v) for v, _ in program_graph.captured_variables(concrete)}
    unused = {id(v) for _, v in probed if id(v) not in used}
    for key in _COLLECTIONS:
        collection = graph.get_collection_ref(key)
        collection[:] = [v for v in collection if id(v) not in unused]


def _program(
    function: Callable[[], Nested],
    stacked_streams: Sequence[tf.Tensor],
    streams: _Streams,
) -> list[tf.Tensor]:
    """The executable's computation: the function, its loop run over the stacked elements;
    it gives every step's enqueued tensors (stacked), then what the function returns."""
    step_outputs: list[tf.Tensor] = []

    def run_loop(loop: stream_capture.CapturedLoop) -> Nested:
        stacked = nest.pack_sequence_as(
            streams.element_spec, [_by_step(t, loop) for t in stacked_streams]
        )
        specs = streams.step_output_specs
        arrays = [
            tf.TensorArray(s.dtype, size=loop.iterations, element_shape=s.shape) for s in specs
        ]
        carried = [tf.convert_to_tensor(v) for v in device_loop._as_list(loop.carried)]  # noqa: SLF001

        def step(i: tf.Tensor, arrays: list[tf.TensorArray], *values: tf.Tensor) -> Any:
            element = nest.map_structure(lambda t: t[i], stacked)
            with capture.collecting() as enqueued:
                new, operations = _call_step(loop, list(values), element)
            outputs = stream_capture.flat_outputs(enqueued)
            with tf.control_dependencies(operations):
                arrays = [a.write(i, o) for a, o in zip(arrays, outputs, strict=True)]
                return (i + 1, arrays, *new)

        steps: int | tf.Tensor = loop.iterations
        if not _can_stall(loop) and loop.iterations > 1 and not carried:
            # A run may run fewer steps than the loop's (an embedded runtime given fewer
            # elements; see runtime_instance.py): the count is an input with a default.
            # Not for a loop carrying values, whose steps depend on the earlier ones.
            steps = tf.compat.v1.placeholder_with_default(loop.iterations, [], name=run_steps.NAME)
        # One step after another, as the device loop runs them.
        done, arrays, *values = tf.while_loop(
            lambda i, *_: i < steps,
            step,
            (tf.constant(0), arrays, *carried),
            parallel_iterations=1,
        )
        step_outputs.extend(a.stack() for a in arrays)
        return device_loop._loop_results(values, done)  # noqa: SLF001 - the loop's own results

    with stream_capture.capturing(run_loop) as capture, iterator_loops.streaming_iterator_loops():
        returned = function()
    top_level = stream_capture.flat_outputs(capture.top_level_enqueues)
    return [*step_outputs, *(tf.expand_dims(t, 0) for t in top_level), *_returned_tensors(returned)]


def _probe(function: Callable[[], Nested], streams: _Streams) -> None:
    """Traces `function` once to find its infeed loop, what it enqueues and returns."""

    def run_loop(loop: stream_capture.CapturedLoop) -> Nested:
        _check_one_loop(capture)
        element_spec = getattr(loop.infeed, "element_spec", None)
        if element_spec is None:
            raise ValueError(
                f"The infeed of the function's device loop ({loop.infeed!r}) has no element_spec"
            )
        zeros = nest.map_structure(
            lambda s: tf.zeros(_step_shape(s.shape, loop), s.dtype), element_spec
        )
        carried = [tf.convert_to_tensor(v) for v in device_loop._as_list(loop.carried)]  # noqa: SLF001
        with capture.collecting() as enqueued:
            values, operations = _call_step(loop, carried, zeros)
        streams.iterations = loop.iterations
        streams.can_stall = _can_stall(loop)
        streams.reads_per_step = loop.reads_per_step
        streams.element_spec = element_spec
        streams.step_output_specs = [_spec(t) for t in stream_capture.flat_outputs(enqueued)]
        return device_loop._loop_results(values, tf.group(*operations))  # noqa: SLF001

    with stream_capture.capturing(run_loop) as capture, iterator_loops.streaming_iterator_loops():
        returned = function()
    top_level = stream_capture.flat_outputs(capture.top_level_enqueues)
    _check_top_level_enqueues(top_level, streams.iterations)
    streams.top_level_output_specs = [_spec(t) for t in top_level]
    streams.returned_specs = [_spec(t) for t in _returned_tensors(returned)]


def _can_stall(loop: stream_capture.CapturedLoop) -> bool:
    """Whether the loop can stall waiting for data: a pipeline, or any loop of a system
    reserving I/O tiles (poplar_compiler.cc, ModuleExecutionCanStall)."""
    system = configure.maybe_current_system()
    io_tiles = 0 if system is None else int(system.config.io_tiles.num_io_tiles or 0)
    return loop.can_stall or io_tiles > 0


def _step_shape(shape: tf.TensorShape, loop: stream_capture.CapturedLoop) -> list[Any]:
    """A step's element of a loop reading `reads_per_step` elements: them, stacked."""
    return list(shape) if loop.reads_per_step == 1 else [loop.reads_per_step, *shape]


def _by_step(stacked: tf.Tensor, loop: stream_capture.CapturedLoop) -> tf.Tensor:
    """A stream's elements of a run (one a read), grouped by the step that reads them."""
    if loop.reads_per_step == 1:
        return stacked
    return tf.reshape(stacked, [loop.iterations, loop.reads_per_step, *stacked.shape[1:]])


def _call_step(
    loop: stream_capture.CapturedLoop, carried: list[tf.Tensor], element: Nested
) -> tuple[list[tf.Tensor], list[tf.Operation]]:
    """The step's new loop values and the operations that must run before the next step."""
    # A tf.function body is traced as Python here, so that its enqueues are the step's.
    body = traced_python.python_to_trace(loop.body)
    if carried:
        return device_loop._call_body(body, carried, element)  # noqa: SLF001
    # A loop carrying nothing: whatever the step returns (a pipeline's mini-batch gives a
    # tensor) only has to run.
    args, kwargs = device_loop._element_args(element)  # noqa: SLF001 - the loop's own rule
    returned = body(*args, **kwargs)
    flat = [] if returned is None else nest.flatten(returned)
    return [], [t if isinstance(t, tf.Operation) else t.op for t in flat]


def _check_one_loop(capture: stream_capture.Capture) -> None:
    if len(capture.loops) > 1:
        raise ValueError(
            f"The function runs {len(capture.loops)} device loops over infeeds (a next() of "
            "an iterator or an infeed's _dequeue() outside a loop is one); an executable "
            "streams the elements of one"
        )


def _check_top_level_enqueues(top_level: list[tf.Tensor], iterations: int) -> None:
    if top_level and iterations != 1:
        raise ValueError(
            f"The function enqueues to an outfeed outside its device loop of {iterations} "
            "iterations: an executable gives back one outfeed element per streamed element, "
            "so enqueue inside the loop's body"
        )


def _returned_tensors(returned: Nested) -> list[tf.Tensor]:
    if returned is None or isinstance(returned, tf.Operation):
        return []  # as the original, operations are not outputs
    return [
        tf.convert_to_tensor(t) for t in nest.flatten(returned) if not isinstance(t, tf.Operation)
    ]


def _spec(tensor: tf.Tensor) -> tf.TensorSpec:
    return tf.TensorSpec(tensor.shape, tensor.dtype)


def _refuse_writes_to_frozen(concrete: tf.types.experimental.ConcreteFunction) -> None:
    """A program that writes variables frozen as constants cannot be compiled: the original
    prunes the frozen variables' resource handles from every op that takes them
    (application_runtime/resource_handle_pruner.cc), which leaves a write without its
    variable. A clear error here, naming the variables, instead of a malformed graph's."""
    written = [
        v.name.split(":")[0]
        for v in program_graph.updated_variables(concrete)
        if not engine_variables.is_engine_state(v)
    ]
    if written:
        raise tf.errors.InvalidArgumentError(
            None,
            None,
            f"The program writes the variable(s) {written}, which freeze_variables=True makes "
            "constants of the executable: compile it with freeze_variables=False to give "
            "them as inputs that the executable updates run after run",
        )


def _graph_def(frozen: program_graph.FrozenGraph) -> graph_pb2.GraphDef:
    return graph_pb2.GraphDef.FromString(frozen.graph_def)
