"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/infeed_outfeed_overlap_test.py`.

The infeed and outfeed scenarios of `infeed_outfeed_test.py` with I/O tiles configured
to overlap data transfers with computation (`io_tiles.num_io_tiles = 32`,
`place_ops_on_io_tiles`): the values are those without overlap (the original's numbers).
Device loops (`repeat`, `while_loop`) over infeeds of plain, tuple and named elements,
several loops and runs over one infeed, two infeeds, a training loop; outfeeds of every
step or the last one (ALL and LAST modes) as plain values, tuples and dictionaries, nested
loops with two outfeeds, outfeeds of two programs read at once or later, and an outfeed of
a constant and a variable.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu

v1 = tf.compat.v1
SHAPE = [4, 4]
LAST = ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST


@pytest.fixture(autouse=True)
def io_tiles():
    config = ipu.config.IPUConfig()
    config.ipu_model.compile_ipu_code = False
    config.ipu_model.tiles_per_ipu = 128
    config.io_tiles.num_io_tiles = 32
    config.io_tiles.place_ops_on_io_tiles = True
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _compile(my_net, inputs=()):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        return ipu.ipu_compiler.compile(my_net, inputs=list(inputs))


def _placeholder(shape=SHAPE):
    with tf.device("cpu"):
        return v1.placeholder(np.float32, shape)


def _increasing(count, shape=SHAPE, repeat=True):
    return tu.create_single_increasing_dataset(count, shape=shape, repeat=repeat)


def _pairs(count=3):
    """(v, (v + 10) / 2) of the increasing values 0, 1, 2, 0, ..."""
    return _increasing(count).map(lambda value: (value, (value + 10.0) / 2.0))


def _zeros():
    return tf.constant(0.0, shape=SHAPE, dtype=np.float32)


def _full(value, shape=SHAPE):
    return np.broadcast_to(np.float32(value), shape)


def _run_plus_loop(tf1_graph, dataset, iterations):
    """`repeat(iterations)` of v += x from v = 1 (fed); the result."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    v = _placeholder()
    res = _compile(lambda v: ipu.loops.repeat(iterations, lambda v, x: v + x, (v), infeed), [v])
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        return sess.run(res, {v: np.ones(SHAPE, np.float32)})[0]


@pytest.mark.follows("testSingleInfeedRepeatNonTuple")
def test_single_infeed_repeat_non_tuple(tf1_graph):
    # 1 + 2 * (0 + 1 + ... + 9) = 91.
    np.testing.assert_allclose(_run_plus_loop(tf1_graph, _increasing(10), 20), _full(91))


@pytest.mark.follows("testSingleInfeedSingleRepeatNonTuple")
def test_single_infeed_single_repeat_non_tuple(tf1_graph):
    np.testing.assert_allclose(_run_plus_loop(tf1_graph, _increasing(10), 1), _full(1))


@pytest.mark.follows("testSingleInfeedRepeatNonTupleFiniteDataset")
def test_single_infeed_repeat_non_tuple_finite_dataset(tf1_graph):
    dataset = _increasing(10, repeat=False)
    np.testing.assert_allclose(_run_plus_loop(tf1_graph, dataset, 10), _full(46))


def _run_pairs_loop(tf1_graph, outfeed=None, enqueued=None):
    """5 steps of v += im1 + im2 over the pairs; the result, and what was outfed."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_pairs())

    def body(v, im1, im2):
        v = v + im1 + im2
        if outfeed is None:
            return v
        return v, outfeed.enqueue(enqueued(v, im1, im2))

    res = _compile(lambda: ipu.loops.repeat(5, body, [_zeros()], infeed))
    dequeued = outfeed.dequeue() if outfeed is not None else None
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        result = sess.run(res)[0]
        return result, sess.run(dequeued) if dequeued is not None else None


@pytest.mark.follows("testSingleInfeedRepeatTuple")
def test_single_infeed_repeat_tuple(tf1_graph):
    # Pairs of 0, 1, 2, 0, 1: (0 + 5) + (1 + 5.5) + (2 + 6) + (0 + 5) + (1 + 5.5) = 31.
    np.testing.assert_allclose(_run_pairs_loop(tf1_graph)[0], _full(31))


@pytest.mark.follows("testSingleInfeedRepeatTupleMerge")
def test_single_infeed_repeat_tuple_merge(tf1_graph):
    np.testing.assert_allclose(_run_pairs_loop(tf1_graph)[0], _full(31))


@pytest.mark.follows("testSingleInfeedRepeatNamed")
def test_single_infeed_repeat_named(tf1_graph):
    dataset = _increasing(3).map(lambda value: {"a": value, "b": (value + 10.0) / 2.0})
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def body(v1_, v2_, b, a):  # the elements arrive by name
        return v1_ + a, v2_ + b

    res = _compile(lambda: ipu.loops.repeat(5, body, [_zeros(), _zeros()], infeed))
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        result = sess.run(res)
    np.testing.assert_allclose(result[0], _full(4))
    np.testing.assert_allclose(result[1], _full(27))


@pytest.mark.follows("testSingleInfeedMultipleRepeats")
def test_single_infeed_multiple_repeats(tf1_graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(2))

    def body(v, x):
        return v + x

    def my_net():
        r = ipu.loops.repeat(5, body, [_zeros()], infeed)
        return ipu.loops.repeat(5, body, [r], infeed)

    res = _compile(my_net)
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        np.testing.assert_allclose(sess.run(res)[0], _full(5))


def _run_while_loop(tf1_graph, dataset, body):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    v = _placeholder()

    def my_net(v):
        return ipu.loops.while_loop(lambda i, _: i < 20, body, (0, v), infeed)[1]

    res = _compile(my_net, [v])
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        return sess.run(res, {v: np.ones(SHAPE, np.float32)})[0]


@pytest.mark.follows("testSingleInfeedWhileLoopNonTuple")
def test_single_infeed_while_loop_non_tuple(tf1_graph):
    result = _run_while_loop(tf1_graph, _increasing(10), lambda i, v, x: (i + 1, v + x))
    np.testing.assert_allclose(result, _full(91))


@pytest.mark.follows("testSingleInfeedWhileLoopTuple")
def test_single_infeed_while_loop_tuple(tf1_graph):
    result = _run_while_loop(tf1_graph, _pairs(), lambda i, v, im1, im2: (i + 1, v + im1 + im2))
    np.testing.assert_allclose(result, _full(129.5))


def _summing_program(infeed, iterations):
    def my_net():
        return ipu.loops.repeat(iterations, lambda v, x: v + x, (_zeros()), infeed)

    return _compile(my_net)


@pytest.mark.follows("testSingleInfeedMultipleRuns")
def test_single_infeed_multiple_runs(tf1_graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10))
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        # 0 iterations read nothing; then 0 + 1, 2 + 3, 4 + 5.
        for iterations, expected in [(0, 0), (2, 1), (2, 5), (2, 9)]:
            result = sess.run(_summing_program(infeed, iterations))
            np.testing.assert_allclose(result[0], _full(expected))


@pytest.mark.follows("testTwoInfeedsDifferentPrograms")
def test_two_infeeds_different_programs(tf1_graph):
    infeed1 = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(20))
    infeed2 = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(3))
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed1.initializer)
        sess.run(infeed2.initializer)
        for infeed, expected in [(infeed1, 10), (infeed2, 4), (infeed1, 35), (infeed2, 5)]:
            result = sess.run(_summing_program(infeed, 5))
            np.testing.assert_allclose(result[0], _full(expected))


@pytest.mark.follows("testTrainingLoopWithInfeed")
def test_training_loop_with_infeed(tf1_graph):
    dataset = _increasing(10, shape=[4, 4, 2]).batch(2, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def my_net(iterations):
        def body(loss, x):
            with v1.variable_scope("vs", use_resource=True):
                y = tf.keras.layers.Conv2D(
                    2, 1, use_bias=True, kernel_initializer="ones", name="conv1"
                )(x)
            loss = tf.reduce_sum(y)
            train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            with tf.control_dependencies([train]):
                return tf.identity(loss)

        return ipu.loops.repeat(iterations, body, (0.0), infeed)

    with tf.device("cpu"):
        iterations = v1.placeholder(np.int32, shape=[])
    r = _compile(my_net, [iterations])
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        sess.run(v1.global_variables_initializer())
        initial_loss = sess.run(r, {iterations: 1})
        final_loss = sess.run(r, {iterations: 100})
    assert initial_loss > final_loss


def _counting_program(outfeed, iterations, shape):
    """`iterations` steps outfeeding v, then v += 1, from a fed v."""

    def body(v):
        return v + 1, outfeed.enqueue(v)

    v = _placeholder(shape)
    return v, _compile(lambda v: ipu.loops.repeat(iterations, body, (v)), [v])


@pytest.mark.follows("testSingleOutfeedRepeatNonTuple")
def test_single_outfeed_repeat_non_tuple(tf1_graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    v, res = _counting_program(outfeed, 20, SHAPE)
    dequeued = outfeed.dequeue()
    with v1.Session(graph=tf1_graph) as sess:
        result = sess.run(res, {v: np.ones(SHAPE, np.float32)})
        outfed = sess.run(dequeued)
    np.testing.assert_allclose(result[0], _full(21))
    np.testing.assert_allclose(outfed, [_full(i + 1) for i in range(20)])


@pytest.mark.follows("testMultipleOutfeedsInSameGraph")
def test_multiple_outfeeds_in_same_graph(tf1_graph):
    outfeed1 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    outfeed2 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def inner_body(v):
        return v + 1, outfeed2.enqueue(v)

    def body(v):
        outfeed = outfeed1.enqueue(v)
        return ipu.loops.repeat(10, inner_body, v), outfeed

    v = _placeholder([])
    res = _compile(lambda v: ipu.loops.repeat(10, body, v), [v])
    dequeued = [outfeed1.dequeue(), outfeed2.dequeue()]
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(res, {v: 0.0})
        out1, out2 = sess.run(dequeued)
    np.testing.assert_array_equal(out1, np.arange(0, 100, step=10))
    np.testing.assert_array_equal(out2, np.arange(0, 100))


@pytest.mark.follows("testSingleInfeedOutfeedRepeatNonTuple")
def test_single_infeed_outfeed_repeat_non_tuple(tf1_graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(v, x):
        v = v + x
        return v, outfeed.enqueue(v)

    v = _placeholder()
    res = _compile(lambda v: ipu.loops.repeat(20, body, (v), infeed), [v])
    with v1.Session(graph=tf1_graph) as sess:
        sess.run(infeed.initializer)
        result = sess.run(res, {v: np.ones(SHAPE, np.float32)})
        outfed = sess.run(outfeed.dequeue())
    np.testing.assert_allclose(result[0], _full(91))
    assert outfed.shape == (20, 4, 4)
    np.testing.assert_allclose(outfed[-1], result[0])
    np.testing.assert_allclose(outfed[5], _full(16))


# The pairs' running sums, first and second elements over the 5 steps.
RUNNING = [5, 11.5, 19.5, 24.5, 31]
FIRSTS = [0, 1, 2, 0, 1]
SECONDS = [5, 5.5, 6, 5, 5.5]


@pytest.mark.follows("testSingleInfeedOutfeedRepeatTuple")
def test_single_infeed_outfeed_repeat_tuple(tf1_graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    result, outfed = _run_pairs_loop(tf1_graph, outfeed, lambda v, im1, im2: (v, im1, im2))
    np.testing.assert_allclose(result, _full(31))
    assert len(outfed) == 3
    for column, expected in zip(outfed, [RUNNING, FIRSTS, SECONDS], strict=True):
        np.testing.assert_allclose(column, [_full(e) for e in expected])


@pytest.mark.follows("testSingleInfeedOutfeedRepeatTupleLast")
def test_single_infeed_outfeed_repeat_tuple_last(tf1_graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=LAST)
    result, outfed = _run_pairs_loop(tf1_graph, outfeed, lambda v, im1, im2: (v, im1, im2))
    np.testing.assert_allclose(result, _full(31))
    assert len(outfed) == 3
    for value, expected in zip(outfed, [31, 1, 5.5], strict=True):
        np.testing.assert_allclose(value, _full(expected))


def _named(v, im1, im2):
    return {"v": v, "image1": im1, "image2": im2}


@pytest.mark.follows("testSingleInfeedOutfeedRepeatNamed")
def test_single_infeed_outfeed_repeat_named(tf1_graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    result, outfed = _run_pairs_loop(tf1_graph, outfeed, _named)
    np.testing.assert_allclose(result, _full(31))
    assert len(outfed) == 3
    for name, expected in zip(["v", "image1", "image2"], [RUNNING, FIRSTS, SECONDS], strict=True):
        np.testing.assert_allclose(outfed[name], [_full(e) for e in expected])


@pytest.mark.follows("testSingleInfeedOutfeedRepeatNamedLast")
def test_single_infeed_outfeed_repeat_named_last(tf1_graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=LAST)
    result, outfed = _run_pairs_loop(tf1_graph, outfeed, _named)
    np.testing.assert_allclose(result, _full(31))
    assert len(outfed) == 3
    for name, expected in zip(["v", "image1", "image2"], [31, 1, 5.5], strict=True):
        np.testing.assert_allclose(outfed[name], _full(expected))


def _two_outfed_programs(tf1_graph, read_between):
    outfeed1 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    outfeed2 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    x1, res1 = _counting_program(outfeed1, 5, [4, 4])
    x2, res2 = _counting_program(outfeed2, 7, [5, 5])
    dequeue1, dequeue2 = outfeed1.dequeue(), outfeed2.dequeue()
    with v1.Session(graph=tf1_graph) as sess:
        result1 = sess.run(res1, {x1: np.ones([4, 4], np.float32)})
        outfed1 = sess.run(dequeue1) if read_between else None
        result2 = sess.run(res2, {x2: np.full([5, 5], 4, np.float32)})
        if not read_between:
            outfed1 = sess.run(dequeue1)
        outfed2 = sess.run(dequeue2)
    np.testing.assert_allclose(result1[0], _full(6))
    np.testing.assert_allclose(result2[0], _full(11, [5, 5]))
    np.testing.assert_allclose(outfed1, [_full(i + 1) for i in range(5)])
    np.testing.assert_allclose(outfed2, [_full(i + 4, [5, 5]) for i in range(7)])


@pytest.mark.follows("testTwoOutfeedsDifferentPrograms")
def test_two_outfeeds_different_programs(tf1_graph):
    _two_outfed_programs(tf1_graph, read_between=True)


@pytest.mark.follows("testTwoOutfeedsDifferentProgramsDelayedOutfeedRead")
def test_two_outfeeds_different_programs_delayed_outfeed_read(tf1_graph):
    _two_outfed_programs(tf1_graph, read_between=False)


@pytest.mark.follows("testOutfeedNonTensorOutputs")
def test_outfeed_non_tensor_outputs(tf1_graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body():
        with v1.variable_scope("", use_resource=True):
            w = v1.get_variable(
                "w", dtype=np.float32, shape=[1], initializer=v1.constant_initializer(2.0)
            )
        return outfeed.enqueue({101: 1, 2020: w})

    res = _compile(lambda: ipu.loops.repeat(5, body))
    dequeued = outfeed.dequeue()
    with v1.Session(graph=tf1_graph) as sess:
        tu.move_variable_initialization_to_cpu()
        sess.run(v1.global_variables_initializer())
        sess.run(res)
        outfed = sess.run(dequeued)
    np.testing.assert_allclose(outfed[101], [1] * 5)
    np.testing.assert_allclose(outfed[2020], [[2.0]] * 5)
