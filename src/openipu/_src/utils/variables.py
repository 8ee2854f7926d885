"""`move_variable_initialization_to_cpu` for TF1 graphs."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.distribute import values as distribute_values

_CPU = "/device:CPU:0"
_CPU_ANCHOR_NAME = "cpu"


def move_variable_initialization_to_cpu(graph: tf.Graph | None = None) -> None:
    """Places the initial-value operations of all VARIABLES-collection variables on the CPU.

    Moves the operations that compute each variable's initial value (and
    their inputs, up to but not including operations that read resources),
    so that initialising IPU variables runs no initialiser code on the IPU;
    the assignment itself stays with the variable. Variables of distribution
    strategies are left alone: their strategy places their initialisers.

    In TF2 eager mode (no `graph` and no default graph) variables are
    initialised when they are created, so there is nothing to move.
    """
    if graph is None:
        if tf.executing_eagerly():
            return
        graph = tf.compat.v1.get_default_graph()
    if not isinstance(graph, tf.Graph):
        raise TypeError(
            f"move_variable_initialization_to_cpu: graph must be a tf.Graph, got "
            f"{type(graph).__name__}"
        )
    # Initial values are often built colocated with their variable, and
    # colocation outranks the device; colocating them with a CPU anchor wins.
    colocation = attr_value_pb2.AttrValue(
        list=attr_value_pb2.AttrValue.ListValue(s=[f"loc:@{_cpu_anchor(graph)}".encode()])
    )
    for op in _initial_value_ops(graph):
        op._set_device(_CPU)
        op._set_attr("_class", colocation)
        # Keep the initialisers out of XLA clusters compiled for the IPU.
        op._set_attr("_XlaCompile", attr_value_pb2.AttrValue(b=False))
        op._set_attr("_XlaScope", attr_value_pb2.AttrValue(s=b""))


def _cpu_anchor(graph: tf.Graph) -> str:
    """The name of a no-op placed on the CPU, created once per graph."""
    try:
        anchor = graph.get_operation_by_name(_CPU_ANCHOR_NAME)
        if anchor.type == "NoOp" and anchor.device == _CPU:
            return anchor.name
    except KeyError:
        pass
    with graph.as_default(), tf.device(_CPU):
        return tf.no_op(name=_CPU_ANCHOR_NAME).name


def _initial_value_ops(graph: tf.Graph) -> list[tf.Operation]:
    pending = [
        variable.initializer.inputs[1].op
        for variable in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
        if not isinstance(variable, distribute_values.DistributedVariable)
        and getattr(variable, "initializer", None) is not None
        and len(variable.initializer.inputs) > 1
    ]
    found: list[tf.Operation] = []
    seen: set[tf.Operation] = set()
    while pending:
        op = pending.pop()
        if op in seen or _reads_resource(op):
            continue
        seen.add(op)
        found.append(op)
        pending.extend(tensor.op for tensor in op.inputs)
    return found


def _reads_resource(op: tf.Operation) -> bool:
    return any(tensor.dtype == tf.resource for tensor in op.inputs)
