"""TF1 control flow (v1 `cond`/`while_loop` frames) in a replicated TF1 program.

Programs of the TF1 era call `tf.compat.v1.disable_v2_behavior()`, so their `tf.cond`
and `tf.while_loop` build TF1 frames (Switch/Merge, Enter/Exit). Replicated by
`ipu_compiler.compile` on a device of several IPUs, the original traces the Python
once and Poplar runs R copies (graphcore/tensorflow ipu_compiler.py): here each
replica's copy of the frames is made op by op, and the numbers must be those of R
independent replicas meeting only in their collectives (numpy below).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ops import control_flow_util


@pytest.fixture
def v1_control_flow(tf1_graph):
    """What `disable_v2_behavior()` does to control flow, undone after the test."""
    saved = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        yield tf1_graph
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = saved


def _configure(ipus: int) -> None:
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    config.configure_ipu_system()


def _numpy_training(replicas: int, steps: int, learning_rate: float) -> tuple[float, list[float]]:
    """Replica r: acc = 3 w (r + 1) by a loop, y = 2 acc if acc > 4 else acc, loss = y^2;
    the weight moves by the sum of the replicas' gradients."""
    w = 1.0
    losses = []
    for _ in range(steps):
        gradient = 0.0
        total = 0.0
        for r in range(replicas):
            acc = 3 * w * (r + 1)
            scale = 2.0 if acc > 4.0 else 1.0
            y = scale * acc
            total += y * y
            gradient += 2 * y * scale * 3 * (r + 1)
        losses.append(total)
        w -= learning_rate * gradient
    return w, losses


@pytest.mark.parametrize("replicas", [1, 2])
def test_training_through_tf1_loops_and_conds_on_replicas(v1_control_flow, replicas):
    _configure(replicas)
    traces = []
    learning_rate = 0.001
    try:

        def step(total):
            traces.append(1)
            with tf.compat.v1.variable_scope("model", use_resource=True):
                w = tf.compat.v1.get_variable(
                    "w", shape=[], initializer=tf.constant_initializer(1.0)
                )
            r = tf.cast(ipu.replication_ops.replication_index(), tf.float32)
            _, acc = tf.compat.v1.while_loop(
                lambda i, _: i < 3,
                lambda i, acc: [i + 1, acc + w * (r + 1.0)],
                [0, 0.0],
                maximum_iterations=3,  # XLA needs it for the gradient (stock TF's rule)
            )
            y = tf.compat.v1.cond(acc > 4.0, lambda: acc * 2.0, lambda: acc)
            loss = y * y
            (gradient,) = tf.compat.v1.gradients(loss, [w])
            gradient = ipu.cross_replica_ops.cross_replica_sum(gradient)
            with tf.control_dependencies([w.assign_sub(learning_rate * gradient)]):
                return total + ipu.cross_replica_ops.cross_replica_sum(loss)

        def program():
            return ipu.loops.repeat(3, step, [tf.constant(0.0)])

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            (summed,) = ipu.ipu_compiler.compile(program)
        with tf.compat.v1.variable_scope("model", reuse=True, use_resource=True):
            weight = tf.compat.v1.get_variable("w")
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            total = session.run(summed)
            trained = session.run(weight)
    finally:
        ipu.config.reset_ipu_configuration()
    expected_w, losses = _numpy_training(replicas, 3, learning_rate)
    np.testing.assert_allclose(trained, expected_w, rtol=1e-5)
    np.testing.assert_allclose(total, sum(losses), rtol=1e-5)
    assert len(traces) == 1  # the step's Python, traced once whatever the replicas


def test_losses_collection_holds_one_trace(v1_control_flow):
    """`tf.compat.v1.losses` collect their values in the graph: a replicated program reads
    its own (the original traces once), and the sum over replicas is that of R copies."""
    _configure(2)
    try:

        def program():
            x = tf.constant([1.0])
            with tf.compat.v1.variable_scope("", use_resource=True):
                w = tf.compat.v1.get_variable(
                    "w", shape=[], initializer=tf.constant_initializer(1.0)
                )
            y = tf.compat.v1.cond(x[0] > 2.0, lambda: x * w, lambda: x * 2.0 * w)
            tf.compat.v1.losses.absolute_difference(tf.zeros_like(y), y)
            return ipu.cross_replica_ops.cross_replica_sum(tf.compat.v1.losses.get_total_loss())

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            (summed,) = ipu.ipu_compiler.compile(program)
        assert len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES)) == 1
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            assert session.run(summed) == 4.0  # each replica's |2 w| = 2
    finally:
        ipu.config.reset_ipu_configuration()


def test_a_rebuilt_program_leaves_its_first_build_out_of_the_collections(tf1_graph):
    """On 2 IPUs a program sharded over 2 IPUs is one replica: found while building (the
    shard scope), so the first build (2 replicas assumed) is abandoned. Its losses must
    not stay in the graph's LOSSES collection (`get_total_loss` would add them)."""
    _configure(2)
    try:

        def program():
            with ipu.scopes.ipu_shard(0):
                x = tf.constant([[1.0, 2.0]])
                with tf.compat.v1.variable_scope("", use_resource=True):
                    w = tf.compat.v1.get_variable(
                        "w", shape=[2, 1], initializer=tf.constant_initializer(0.5)
                    )
                y = tf.matmul(x, w)
                tf.compat.v1.losses.mean_squared_error(tf.zeros_like(y), y)
            with ipu.scopes.ipu_shard(1):
                return tf.compat.v1.losses.get_total_loss() * 1.0

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            (loss,) = ipu.ipu_compiler.compile(program)
        assert len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES)) == 1
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            np.testing.assert_allclose(session.run(loss), 1.5**2)  # (1 * 0.5 + 2 * 0.5)^2
    finally:
        ipu.config.reset_ipu_configuration()
