"""`loops.repeat` and `loops.while_loop` (spec 21.8), with and without an infeed; E20."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def _run_tf2(strategy, fn):
    return strategy.run(tf.function(fn, jit_compile=True))


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


def _dataset(n=12, width=3):
    values = np.arange(n * width, dtype=np.float32).reshape(n, width)
    return values, tf.data.Dataset.from_tensor_slices(values)


def test_repeat_without_infeed(strategy):
    result = _run_tf2(strategy, lambda: ipu.loops.repeat(5, lambda a, b: (a + 1, b * 2), [0, 1.0]))
    assert [int(result[0]), float(result[1])] == [5, 32.0]


def test_repeat_single_input_returns_a_tensor(strategy):
    result = _run_tf2(strategy, lambda: ipu.loops.repeat(3, lambda a: a + 2.0, 1.0))
    assert float(result) == 7.0


def test_repeat_with_infeed_consumes_one_element_per_iteration(strategy):
    values, dataset = _dataset()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def net():
        return ipu.loops.repeat(4, lambda total, x: total + tf.reduce_sum(x), [0.0], infeed)

    first = float(_run_tf2(strategy, net))
    second = float(_run_tf2(strategy, net))
    assert first == values[:4].sum() and second == values[4:8].sum()
    assert infeed.dequeued


def test_repeat_with_dict_elements_passes_keyword_arguments(strategy):
    dataset = tf.data.Dataset.from_tensor_slices(
        {"features": np.ones([6, 2], np.float32), "labels": np.arange(6, dtype=np.float32)}
    )
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def body(total, features, labels):
        return total + tf.reduce_sum(features) * labels

    result = _run_tf2(strategy, lambda: ipu.loops.repeat(6, body, [0.0], infeed))
    assert float(result) == sum(2.0 * i for i in range(6))


def test_repeat_zero_iterations_keeps_inputs(strategy):
    assert float(_run_tf2(strategy, lambda: ipu.loops.repeat(0, lambda a: a + 1, [4.0]))) == 4.0


def test_repeat_negative_n_runs_no_iteration_as_the_original(strategy):
    # The original's repeat is a while_loop with maximum_iterations=n: n < 0 runs nothing.
    assert float(_run_tf2(strategy, lambda: ipu.loops.repeat(-3, lambda a: a + 1, [4.0]))) == 4.0


def _stock_while_count(n):
    """Iterations stock TensorFlow's while_loop runs with maximum_iterations=n, as the
    original's repeat (tensorflow/python/ipu/loops.py) builds its loop."""
    return tf.compat.v1.while_loop(lambda i: True, lambda i: i + 1, [0.0], maximum_iterations=n)


def test_repeat_with_a_float_n_in_a_tf2_function_fails_as_while_v2(strategy):
    with pytest.raises(TypeError) as stock:
        tf.function(lambda: _stock_while_count(2.5))()
    with pytest.raises(TypeError, match="Expected int32, got 2.5") as ours:
        _run_tf2(strategy, lambda: ipu.loops.repeat(2.5, lambda a: a + 1, [1.0]))
    assert "Expected int32" in str(stock.value) and "2.5" in str(ours.value)


def test_repeat_with_a_float_n_in_a_tf1_graph_runs_while_the_counter_is_below_n(
    ipu_system, tf1_graph
):
    tf.compat.v1.disable_control_flow_v2()  # as tf.compat.v1.disable_v2_behavior() does
    try:
        stock = _stock_while_count(2.5)
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            ours = ipu.loops.repeat(2.5, lambda a: a + 1.0, [0.0])
        with tf.compat.v1.Session(graph=tf1_graph) as session:
            assert session.run(ours) == session.run(stock) == 3.0
    finally:
        tf.compat.v1.enable_control_flow_v2()


def test_repeat_with_a_float_n_eagerly_truncates_it_as_the_eager_while_loop(strategy):
    stock = float(_stock_while_count(2.5))
    ours = float(ipu.loops.repeat(2.5, lambda a: a + 1.0, [0.0]))
    bounded = float(
        ipu.loops.while_loop(lambda a: True, lambda a: a + 1.0, [0.0], maximum_iterations=2.5)
    )
    assert ours == bounded == stock == 2.0


def test_repeat_body_with_wrong_signature_raises_type_error(strategy):
    with pytest.raises(TypeError, match="loop body .* cannot be called with 2 positional"):
        _run_tf2(strategy, lambda: ipu.loops.repeat(2, lambda a: a, [1.0, 2.0]))


def test_repeat_body_must_return_every_value(strategy):
    with pytest.raises(ValueError, match="returned 1 tensor.* carries 2 value"):
        _run_tf2(strategy, lambda: ipu.loops.repeat(2, lambda a, b: a, [1.0, 2.0]))


def test_infeed_must_be_an_infeed_queue(strategy):
    with pytest.raises(TypeError, match="infeed_queue must be an ipu_infeed_queue"):
        ipu.loops.repeat(2, lambda a: a, [1.0], infeed_queue=tf.data.Dataset.range(3))


def test_while_loop_without_infeed(strategy):
    result = _run_tf2(
        strategy,
        lambda: ipu.loops.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i), [0, 0]),
    )
    assert [int(result[0]), int(result[1])] == [5, 10]


def test_while_loop_with_infeed_stops_on_condition(strategy):
    values, dataset = _dataset()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def net():
        return ipu.loops.while_loop(
            lambda i, total: total < 20.0,
            lambda i, total, x: (i + 1, total + x[0]),
            [0, 0.0],
            infeed,
        )

    count, total = _run_tf2(strategy, net)
    expected_total, expected_count = 0.0, 0
    for row in values:
        if expected_total >= 20.0:
            break
        expected_total += row[0]
        expected_count += 1
    assert (int(count), float(total)) == (expected_count, expected_total)
    # The next run continues from the following element.
    count2, _ = _run_tf2(strategy, net)
    assert int(count2) >= 1


def test_while_loop_maximum_iterations(strategy):
    result = _run_tf2(
        strategy,
        lambda: ipu.loops.while_loop(lambda i: i < 100, lambda i: i + 1, [0], maximum_iterations=7),
    )
    assert int(result) == 7


def test_while_loop_condition_with_wrong_signature_raises_type_error(strategy):
    with pytest.raises(TypeError, match="loop condition"):
        _run_tf2(strategy, lambda: ipu.loops.while_loop(lambda: True, lambda i: i + 1, [0]))


def test_repeat_in_tf1_graph_outside_compile_opens_its_own_program(ipu_system, tf1_graph):
    values, dataset = _dataset()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.loops.repeat(3, lambda total, x: total + tf.reduce_sum(x), [0.0], infeed)
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        session.run(infeed.initializer)
        assert session.run(result) == values[:3].sum()


def test_nested_repeat_with_outfeed_keeps_every_element(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def inner(j, i):
        return j + 1, outfeed.enqueue(i * 10 + j)

    def outer(i):
        ipu.loops.repeat(3, lambda j: inner(j, i), [0])
        return i + 1

    _run_tf2(strategy, lambda: ipu.loops.repeat(2, outer, [0]))
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [0, 1, 2, 10, 11, 12])


def test_loop_runs_under_xla_when_it_can(strategy, caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="openipu._src.engine.region")
    _run_tf2(strategy, lambda: ipu.loops.repeat(3, lambda a: a * 2.0, [1.0]))
    assert any("runs as xla" in r.message for r in caplog.records)


def test_repeat_zero_times_with_an_infeed_reads_nothing(strategy):
    values, dataset = _dataset()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def net(n):
        return lambda: ipu.loops.repeat(n, lambda total, x: total + tf.reduce_sum(x), [0.0], infeed)

    assert float(_run_tf2(strategy, net(0))) == 0.0
    assert float(_run_tf2(strategy, net(1))) == float(values[0].sum())  # the first element
