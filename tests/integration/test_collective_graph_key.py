"""Which runs of a distributed TF1 session declare a collective graph key.

Only runs that execute a function holding a collective (through a loop's body, a
nested call) declare one; a run that executes none must leave every worker's step-id
sequence alone. The scenarios on real gRPC servers are the multi-worker pipelining
conformance tests (tests/conformance/test_ipu_multi_worker_strategy_test.py).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from openipu._src.integration import collective_graph_key

v1 = tf.compat.v1


def _all_reduce(x):
    return tf.raw_ops.CollectiveReduceV2(
        input=x,
        group_size=1,
        group_key=1,
        instance_key=7,
        ordering_token=[],
        merge_op="Add",
        final_op="Id",
    )


def _loop_graph():
    graph = tf.Graph()
    with graph.as_default():
        start = v1.placeholder(np.float32, [], name="start")
        weight = v1.get_variable("w", initializer=1.0, use_resource=True)

        @tf.function
        def reduced(x):  # the collective one call deeper than the loop body
            return _all_reduce(x)

        _, total = tf.while_loop(
            lambda i, _: i < 3, lambda i, x: (i + 1, reduced(x) + 1.0), [0, start]
        )
        plain = weight.read_value() * 2.0
        after_loop = tf.identity(total) + plain
    return graph, start, weight, total, plain, after_loop


def test_runs_reaching_the_loop_declare_a_key_others_do_not():
    graph, start, weight, total, plain, after_loop = _loop_graph()
    assert collective_graph_key.run_needs_key(graph, total, {start: 1.0})
    assert collective_graph_key.run_needs_key(graph, {"x": [after_loop]}, None)
    assert collective_graph_key.run_needs_key(graph, after_loop.name, None)
    assert not collective_graph_key.run_needs_key(graph, plain, None)
    assert not collective_graph_key.run_needs_key(graph, [weight.initializer, plain], None)
    # A fed tensor cuts the graph: the loop's result given, the loop does not run.
    assert not collective_graph_key.run_needs_key(graph, after_loop, {total: 2.0})


def test_a_control_dependency_on_the_loop_reaches_it():
    graph, _, _, total, _, _ = _loop_graph()
    with graph.as_default(), tf.control_dependencies([total.op]):
        marker = tf.no_op(name="after")
    assert collective_graph_key.run_needs_key(graph, marker, None)


def test_graphs_without_collectives_in_functions_never_declare_one():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(np.float32, [])
        _, y = tf.while_loop(lambda i, _: i < 3, lambda i, v: (i + 1, v * 2.0), [0, x])
    assert not collective_graph_key.run_needs_key(graph, y, None)


def test_a_graph_grown_after_a_run_is_scanned_again():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(np.float32, [])
        doubled = x * 2.0
    assert not collective_graph_key.run_needs_key(graph, doubled, None)
    with graph.as_default():
        _, y = tf.while_loop(lambda i, _: i < 2, lambda i, v: (i + 1, _all_reduce(v)), [0, x])
    assert collective_graph_key.run_needs_key(graph, y, None)
