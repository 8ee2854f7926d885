"""A program's computation as a frozen TensorFlow graph: written once, loaded without tracing.

`freeze` turns a traced function into a GraphDef of plain TensorFlow ops: variables become
constants (their values when frozen), or resource inputs that a run gives as the handles
of its own variables when they are to be given at start-up. `load` imports such a graph
into a function the engine runs (under XLA or as a graph, as the program's record says),
with no Python of the original program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework import auto_control_deps_utils as acd_utils
from tensorflow.python.framework import convert_to_constants

from openipu._src.engine.compile_policy import CompileMode
from openipu._src.integration import frozen_functions


@dataclasses.dataclass(frozen=True)
class FrozenGraph:
    """A GraphDef with the names of its input and output tensors, in call order."""

    graph_def: bytes
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def freeze(
    concrete: tf.types.experimental.ConcreteFunction,
    variables_as_inputs: bool,
    given: dict[int, np.ndarray] | None = None,
    state: Sequence[tf.Variable] = (),
) -> FrozenGraph:
    """`concrete` as a frozen graph. With `variables_as_inputs`, each variable it uses
    stays a resource: an input after the function's own, in the order of
    `captured_variables`, that a run gives as a variable's handle (so a program that
    updates its variables, a training loop, updates the runner's copies).

    The `state` variables (the engine's: gradient accumulators, counters) stay resources
    in either case, the last inputs, in their order: the runner keeps them.

    The other captures' values are read eagerly, or taken from `given` (keyed by the id
    of the captured tensor, a variable's handle): a TF1 graph's, read when the graph runs.
    """
    kept = {id(v.handle) for v in state}
    if variables_as_inputs:
        return _with_variable_inputs(concrete, given, kept)
    if given is None and not kept:
        # Control flow stays functional (While, If): XLA compiles only that form.
        frozen = convert_to_constants.convert_variables_to_constants_v2(
            concrete, lower_control_flow=False
        )
        graph_def = frozen.graph.as_graph_def()
        inputs = [t.name for t in frozen.inputs]
        outputs = [t.name for t in frozen.outputs]
    else:
        if given is None:
            given = _values_now(concrete, kept)
        internal_of = {id(external): internal for external, internal in concrete.graph.captures}
        graph_def, converted = frozen_functions.freeze_with_values(
            concrete, given, keep={internal_of[key].op.name for key in kept}
        )
        internal = concrete.graph.internal_captures
        constants = {id(internal[index]) for index in converted}
        inputs = [t.name for t in concrete.inputs if id(t) not in constants]
        # The kept variables last, in `state`'s order.
        kept_names = [internal_of[id(v.handle)].name for v in state]
        inputs = [n for n in inputs if n not in kept_names] + kept_names
        outputs = [t.name for t in concrete.outputs]
    return FrozenGraph(
        graph_def.SerializeToString(deterministic=True), tuple(inputs), tuple(outputs)
    )


def _values_now(
    concrete: tf.types.experimental.ConcreteFunction, kept: set[int]
) -> dict[int, np.ndarray]:
    """The captures' values, read eagerly (variables by their handle), but the kept ones."""
    variables = {id(v.handle): v for v in concrete.graph.variables}
    values = {}
    for external, _ in concrete.graph.captures:
        key = id(external)
        if key in kept:
            continue
        variable = variables.get(key)
        values[key] = np.asarray(variable.numpy() if variable is not None else external)
    return values


def _with_variable_inputs(
    concrete: tf.types.experimental.ConcreteFunction,
    given: dict[int, np.ndarray] | None,
    kept: set[int],
) -> FrozenGraph:
    graph = concrete.graph
    graph_def = graph.as_graph_def()  # with the functions of its loops and conditionals
    nodes = {node.name: node for node in graph_def.node}
    variables = {id(v.handle) for v in graph.variables}
    captured = {id(internal) for _, internal in graph.captures}
    variable_inputs, state_inputs = [], []
    for external, internal in graph.captures:
        if id(external) in kept:
            state_inputs.append(internal.name)
            continue
        if id(external) in variables:
            variable_inputs.append(internal.name)
            continue
        if external.dtype == tf.resource:
            if "IteratorResource" in repr(external):
                raise NotImplementedError(
                    "The program reads a tf.data iterator where openipu's executables cannot "
                    "stream it: an executable streams one next() per step of a `for _ in "
                    "tf.range(n)` loop, or one next() at the function's top level (not inside "
                    "device loops without an infeed, other loops or conditionals)"
                )
            raise ValueError(
                f"The program captures a resource that is not a variable ({external!r}): "
                "an executable can hold only tensors and variables"
            )
        value = given[id(external)] if given is not None else np.asarray(external)
        _make_constant(nodes[internal.op.name], np.asarray(value))
    inputs = [t.name for t in concrete.inputs if id(t) not in captured]
    inputs += variable_inputs + state_inputs
    outputs = [t.name for t in concrete.outputs]
    return FrozenGraph(
        graph_def.SerializeToString(deterministic=True), tuple(inputs), tuple(outputs)
    )


def updated_variables(concrete: tf.types.experimental.ConcreteFunction) -> list[tf.Variable]:
    """The captured variables that `concrete` writes (a training loop's weights)."""
    written = []
    for variable, internal in captured_variables(concrete):
        for consumer in internal.consumers():
            _, writes = acd_utils.get_read_write_resource_inputs(consumer)
            if any(handle is internal for handle in writes):
                written.append(variable)
                break
    return written


def _make_constant(node: graph_pb2.NodeDef, value: np.ndarray) -> None:
    node.op = "Const"
    node.ClearField("input")
    node.ClearField("attr")
    node.attr["dtype"].type = tf.as_dtype(value.dtype).as_datatype_enum
    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))


def captured_variables(
    concrete: tf.types.experimental.ConcreteFunction,
) -> list[tuple[tf.Variable, tf.Tensor]]:
    """The variables `concrete` reads, each with its placeholder in the function's graph."""
    variables = {id(v.handle): v for v in concrete.graph.variables}
    pairs = []
    for external, internal in concrete.graph.captures:
        variable = variables.get(id(external))
        if variable is not None:
            pairs.append((variable, internal))
    return pairs


def load(frozen: FrozenGraph, executor: CompileMode) -> Callable[..., list[tf.Tensor]]:
    """A function of the graph's inputs (tensors, in order) giving its outputs (a list)."""
    graph_def = graph_pb2.GraphDef.FromString(frozen.graph_def)

    def import_graph() -> None:
        tf.graph_util.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(import_graph, [])
    graph = wrapped.graph
    pruned = wrapped.prune(
        [graph.get_tensor_by_name(name) for name in frozen.inputs],
        [graph.get_tensor_by_name(name) for name in frozen.outputs],
    )

    def run(*inputs: tf.Tensor) -> list[tf.Tensor]:
        return list(pruned(*inputs))

    # Graph programs (host ops, or convolutions faster on TensorFlow's kernels) run as the
    # pruned graph; the others as one XLA computation, as when they were compiled.
    compiled: Callable[..., list[tf.Tensor]] = tf.function(
        run, jit_compile=executor is CompileMode.XLA, autograph=False
    )
    return compiled
