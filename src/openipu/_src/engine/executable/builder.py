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
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.engine import compile_policy, device_loop, floating_point_checks
from openipu._src.engine.compiled_program import CompiledProgram, StepSchedule
from openipu._src.engine.executable import program_graph, stream_capture
from openipu._src.engine.executable.executable_file import Executable
from openipu._src.engine.executable.signature import StreamSignature, TensorSignature
from openipu._src.engine.value_types import Nested
from openipu._src.system import configure


class _Streams:
    """What the first trace found: the loop's length and element, and what a step enqueues."""

    def __init__(self) -> None:
        self.iterations = 1
        self.element_spec: Nested = None  # None: the function has no infeed loop
        self.output_specs: list[tf.TensorSpec] = []

    @property
    def flat_element_spec(self) -> list[tf.TensorSpec]:
        return [] if self.element_spec is None else list(nest.flatten(self.element_spec))


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


def trace(func: Callable[..., Nested], startup_specs: Sequence[tf.TensorSpec], name: str) -> Traced:
    """Traces `func(*inputs)` for an executable (see the module docstring)."""
    python_function = getattr(func, "python_function", func)  # a tf.function traces anew
    startup_signatures = [
        TensorSignature.of(f"input_{i}", spec) for i, spec in enumerate(startup_specs)
    ]
    specs = [s.spec() for s in startup_signatures]
    streams = _Streams()
    tf.function(lambda *args: _probe(python_function, args, streams)).get_concrete_function(*specs)
    stream_specs = [
        tf.TensorSpec([streams.iterations, *s.shape], s.dtype) for s in streams.flat_element_spec
    ]

    def program(*args: tf.Tensor) -> list[tf.Tensor]:
        return _program(python_function, args[: len(specs)], args[len(specs) :], streams)

    # The IPU's floating-point exception traps, as a region of this system has them; the
    # checks run on the host, so the program runs as a graph.
    fp_bits = floating_point_checks.configured_bits() | floating_point_checks.requested_bits()
    with floating_point_checks.checking(fp_bits):
        concrete = tf.function(program).get_concrete_function(*specs, *stream_specs)
    return Traced(concrete, streams, startup_signatures, fp_bits, name)


def build(
    func: Callable[..., Nested],
    inputs: Sequence[Any],
    name: str,
    freeze_variables: bool,
    kind: str = "application",
    metadata: dict[str, Any] | None = None,
) -> Executable:
    """The executable of `func(*inputs)`, traced and frozen now (eagerly)."""
    specs = [tf.TensorSpec.from_tensor(tf.convert_to_tensor(value)) for value in inputs]
    return finish(trace(func, specs, name), freeze_variables, kind, metadata)


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
    variables = program_graph.captured_variables(concrete)
    frozen = program_graph.freeze(concrete, variables_as_inputs=not freeze_variables, given=given)
    if not freeze_variables and variables:
        # The graph's inputs in the order a run gives them: the start-up inputs, the
        # variables' values (also given at start-up), then the streams.
        names = frozen.inputs
        first, rest = len(startup_signatures), len(names) - len(variables)
        frozen = dataclasses.replace(
            frozen, inputs=(*names[:first], *names[rest:], *names[first:rest])
        )
    graph = concrete.graph
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
    if not freeze_variables:
        # Named as the original names a resource argument of its executable
        # (tests/application_runtime_test.py feeds 'XLA_Args/d1/weight').
        variable_inputs = [
            TensorSignature.of(f"XLA_Args/{variable.name.split(':')[0]}", variable)
            for variable, _ in variables
        ]
    signature = StreamSignature(
        inputs=(*startup_signatures, *variable_inputs),
        streamed_inputs=tuple(
            TensorSignature.of(_spec_name(spec, f"input_{i}"), spec)
            for i, spec in enumerate(streams.flat_element_spec)
        ),
        streamed_outputs=tuple(
            TensorSignature.of(f"output_{i}", spec) for i, spec in enumerate(streams.output_specs)
        ),
    )
    metadata = dict(metadata or {})
    if fp_bits:
        metadata["floating_point_checks"] = sorted(fp_bits)
    return Executable(kind, record, signature, frozen, metadata=metadata)


def _spec_name(spec: tf.TensorSpec, default: str) -> str:
    return str(getattr(spec, "name", None) or default)


def _probe(function: Callable[..., Nested], args: tuple[tf.Tensor, ...], streams: _Streams) -> None:
    """Traces `function` once to find its infeed loop and what the loop's step enqueues."""
    with stream_capture.capturing() as capture:
        returned = function(*args)
        loop = _the_loop(capture)
        if loop is None:
            streams.output_specs = [_spec(t) for t in _returned_tensors(returned)]
            return
        element_spec = getattr(loop.infeed, "element_spec", None)
        if element_spec is None:
            raise ValueError(
                f"The infeed of the function's device loop ({loop.infeed!r}) has no element_spec"
            )
        zeros = nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), element_spec)
        with capture.collecting() as enqueued:
            _call_body(loop, zeros)
        streams.iterations = loop.iterations
        streams.element_spec = element_spec
        streams.output_specs = [_spec(t) for t in stream_capture.flat_outputs(enqueued)]


def _program(
    function: Callable[..., Nested],
    startup: Sequence[tf.Tensor],
    stacked_streams: Sequence[tf.Tensor],
    streams: _Streams,
) -> list[tf.Tensor]:
    """The executable's computation: the function, its loop run over the stacked elements."""
    with stream_capture.capturing() as capture:
        returned = function(*startup)
        loop = _the_loop(capture)
        if loop is None:
            return [tf.expand_dims(t, 0) for t in _returned_tensors(returned)]
        stacked = nest.pack_sequence_as(streams.element_spec, list(stacked_streams))

        def step(element: Nested) -> list[tf.Tensor]:
            with capture.collecting() as enqueued:
                _call_body(loop, element)
            return stream_capture.flat_outputs(enqueued)

        if not streams.output_specs:
            raise ValueError(
                "The function's device loop enqueues nothing to an outfeed: an executable "
                "must give its results through an IPUOutfeedQueue"
            )
        # One step after another, as the device loop runs them.
        outputs = tf.map_fn(
            step, stacked, fn_output_signature=streams.output_specs, parallel_iterations=1
        )
        return list(outputs)


def _the_loop(capture: stream_capture.Capture) -> stream_capture.CapturedLoop | None:
    if len(capture.loops) > 1:
        raise ValueError(
            f"The function runs {len(capture.loops)} device loops over infeeds; an executable "
            "streams the elements of one"
        )
    if not capture.loops:
        return None
    loop = capture.loops[0]
    if device_loop._as_list(loop.carried):  # noqa: SLF001 - the loop's own rule for inputs
        raise ValueError(
            "The device loop of an executable's function may carry no values (its inputs "
            f"were {loop.carried!r}): each call streams its elements in and its results out"
        )
    return loop


def _call_body(loop: stream_capture.CapturedLoop, element: Nested) -> None:
    args, kwargs = device_loop._element_args(element)  # noqa: SLF001 - the loop's own rule
    loop.body(*args, **kwargs)


def _returned_tensors(returned: Nested) -> list[tf.Tensor]:
    if returned is None or isinstance(returned, tf.Operation):
        return []  # as the original, operations are not outputs
    return [
        tf.convert_to_tensor(t) for t in nest.flatten(returned) if not isinstance(t, tf.Operation)
    ]


def _spec(tensor: tf.Tensor) -> tf.TensorSpec:
    return tf.TensorSpec(tensor.shape, tensor.dtype)
