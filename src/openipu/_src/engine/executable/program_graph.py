"""A program's computation as a frozen TensorFlow graph: written once, loaded without tracing.

`freeze` turns a traced function into a GraphDef of plain TensorFlow ops: variables become
constants (their values when frozen), or placeholders fed at run time when they are to be
given as inputs. `load` imports such a graph into a function the engine runs (under XLA or
as a graph, as the program's record says), with no Python of the original program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, graph_pb2, tensor_shape_pb2
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
) -> FrozenGraph:
    """`concrete` as a frozen graph. With `variables_as_inputs`, each variable it reads
    becomes an input after the function's own, in the order of `captured_variables`.

    The captures' values are read eagerly, or taken from `given` (keyed by the id of the
    captured tensor, a variable's handle): a TF1 graph's, read when the graph runs.
    """
    variable_nodes = [placeholder.op.name for _, placeholder in captured_variables(concrete)]
    if given is None:
        # Control flow stays functional (While, If): XLA compiles only that form.
        frozen = convert_to_constants.convert_variables_to_constants_v2(
            concrete, lower_control_flow=False
        )
        graph_def = frozen.graph.as_graph_def()
        inputs = [t.name for t in frozen.inputs]
        outputs = [t.name for t in frozen.outputs]
    else:
        graph_def, converted = frozen_functions.freeze_with_values(concrete, given)
        internal = concrete.graph.internal_captures
        constants = {id(internal[index]) for index in converted}
        inputs = [t.name for t in concrete.inputs if id(t) not in constants]
        outputs = [t.name for t in concrete.outputs]
    if variables_as_inputs:
        # The converter turned each variable's placeholder into a constant of the same name
        # (convert_to_constants._FunctionConverter): make it a placeholder again, of the value.
        nodes = {node.name: node for node in graph_def.node}
        for name in variable_nodes:
            _make_placeholder(nodes[name])
            inputs.append(f"{name}:0")
    return FrozenGraph(
        graph_def.SerializeToString(deterministic=True), tuple(inputs), tuple(outputs)
    )


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


def _make_placeholder(node: graph_pb2.NodeDef) -> None:
    value = node.attr["value"].tensor
    dtype = node.attr["dtype"].type
    node.op = "Placeholder"
    node.ClearField("attr")
    node.attr["dtype"].type = dtype
    node.attr["shape"].CopyFrom(
        attr_value_pb2.AttrValue(
            shape=tensor_shape_pb2.TensorShapeProto(dim=value.tensor_shape.dim)
        )
    )


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
