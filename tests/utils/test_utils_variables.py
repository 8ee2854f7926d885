"""`move_variable_initialization_to_cpu` on TF1 graphs, and as a no-op in eager mode."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.utils import move_variable_initialization_to_cpu

CPU = "/device:CPU:0"
IPU = "/device:IPU:0"


def _ancestors(op: tf.Operation) -> list[tf.Operation]:
    """`op` and every operation it depends on through data inputs."""
    found, pending = [], [op]
    while pending:
        current = pending.pop()
        if current not in found:
            found.append(current)
            pending.extend(t.op for t in current.inputs)
    return found


def _compiled_for_the_ipu(op: tf.Operation) -> bool:
    """Built under the IPU's device scope: on its host device, in its XLA JIT scope."""
    try:
        return op.get_attr("_XlaCompile") is True
    except ValueError:
        return False


def _build_ipu_variables(use_resource: bool):
    with tf.device(IPU):
        uniform = tf.compat.v1.get_variable(
            "uniform",
            shape=[2, 3],
            initializer=tf.compat.v1.random_uniform_initializer(),
            use_resource=use_resource,
        )
        scaled = tf.compat.v1.Variable(tf.ones([2]) * 3.0, use_resource=use_resource)
    return uniform, scaled


@pytest.mark.parametrize("use_resource", [True, False])
def test_moves_initial_values_to_the_cpu(tf1_graph, use_resource):
    variables = _build_ipu_variables(use_resource)
    initial_value_ops = [v.initializer.inputs[1].op for v in variables]
    # The premise: without the move, each initial value runs on the IPU, by device (a
    # plain tf.device naming an IPU means its host device and its XLA scope, as ipu_scope)
    # or by colocation with its variable.
    assert all(
        _compiled_for_the_ipu(op) or op.colocation_groups() != [f"loc:@{op.name}".encode()]
        for op in initial_value_ops
    )

    move_variable_initialization_to_cpu()

    for variable, initial_value_op in zip(variables, initial_value_ops, strict=True):
        moved = [op for op in _ancestors(initial_value_op) if op.type != "VarHandleOp"]
        assert moved and all(op.device == CPU for op in moved), [(o.name, o.device) for o in moved]
        assert all(op.colocation_groups() == [b"loc:@cpu"] for op in moved)
        assert all(op.get_attr("_XlaCompile") is False for op in moved)
        # The assignment stays with the variable it writes, compiled for the IPU.
        assert _compiled_for_the_ipu(variable.initializer)
    random_ops = [op for op in tf1_graph.get_operations() if op.type == "RandomUniform"]
    assert random_ops and all(op.device == CPU for op in random_ops)


def test_moved_initialisers_still_initialise(tf1_graph):
    uniform, scaled = _build_ipu_variables(use_resource=True)
    move_variable_initialization_to_cpu()
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    with tf.compat.v1.Session(config=config) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        uniform_value, scaled_value = session.run([uniform, scaled])
    assert uniform_value.shape == (2, 3) and ((uniform_value >= 0) & (uniform_value < 1)).all()
    np.testing.assert_array_equal(scaled_value, [3.0, 3.0])


def test_takes_an_explicit_graph():
    graph = tf.Graph()
    with graph.as_default():
        uniform, _ = _build_ipu_variables(use_resource=True)
    move_variable_initialization_to_cpu(graph)  # from eager code
    assert uniform.initializer.inputs[1].op.device == CPU


def test_calling_twice_reuses_the_cpu_anchor(tf1_graph):
    _build_ipu_variables(use_resource=True)
    move_variable_initialization_to_cpu()
    move_variable_initialization_to_cpu()
    assert [op.name for op in tf1_graph.get_operations() if op.type == "NoOp"] == ["cpu"]


def test_eager_mode_is_a_no_op():
    variable = tf.Variable([1.0, 2.0])
    assert move_variable_initialization_to_cpu() is None
    np.testing.assert_array_equal(variable.numpy(), [1.0, 2.0])


def test_rejects_something_that_is_not_a_graph():
    with pytest.raises(TypeError, match="must be a tf.Graph"):
        move_variable_initialization_to_cpu("graph")
