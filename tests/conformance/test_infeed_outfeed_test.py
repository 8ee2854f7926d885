"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/infeed_outfeed_test.py`.

Infeeds and outfeeds in TF1 programs (`ipu_compiler.compile`, sessions) and TF2
(`IPUStrategy`): repeat and while loops over infeeds of tensors, tuples and dicts,
several loops and programs sharing a feed, outfeeds in ALL and LAST modes, nested
structures, feed data types, and outfeed iterators. The datasets are the original's
`create_single_increasing_dataset(n, shape)`: element i is a tensor of shape `shape`
filled with i, the n elements repeated (unless `repeat=False`). Expected values are the
original's, recomputed where noted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

v1 = tf.compat.v1


def _increasing(n, shape=(), dtype=np.float32, repeat=True):
    dataset = tf.data.Dataset.range(n).map(lambda i: tf.fill(list(shape), tf.cast(i, dtype)))
    return dataset.repeat() if repeat else dataset


def _pair(value):
    return value, (value + 10.0) / 2.0


@pytest.fixture
def graph(ipu_system, tf1_graph):
    """A TF1 graph on a configured single-IPU system, as the original's graph-mode tests."""
    return tf1_graph


def _compile(fn, inputs=None):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        return ipu.ipu_compiler.compile(fn, inputs=inputs)


def _placeholder(shape, dtype=np.float32):
    with tf.device("cpu"):
        return v1.placeholder(dtype, shape)


def _full(value, shape=(4, 4)):
    return np.broadcast_to(np.float32(value), shape)


@pytest.mark.follows("testSingleInfeedRepeatNonTuple")
@pytest.mark.parametrize("latency", [True, False])
def test_single_infeed_repeat_non_tuple(graph, latency):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 4]), optimise_latency=latency)
    v = _placeholder([4, 4])
    res = _compile(lambda v: ipu.loops.repeat(20, lambda v, x: v + x, (v), infeed), [v])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        result = sess.run(res, {v: np.ones([4, 4], np.float32)})
    np.testing.assert_allclose(result[0], _full(91))  # 1 + 2 * (0 + ... + 9)


@pytest.mark.follows("testSingleInfeedRepeatNonTupleFiniteDataset")
def test_single_infeed_repeat_non_tuple_finite_dataset(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 4], repeat=False))
    v = _placeholder([4, 4])
    res = _compile(lambda v: ipu.loops.repeat(10, lambda v, x: v + x, (v), infeed), [v])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        result = sess.run(res, {v: np.ones([4, 4], np.float32)})
    np.testing.assert_allclose(result[0], _full(46))


def _tuple_repeat(merge_io_copies: bool):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(3, [4, 4]).map(_pair))

    def my_net():
        v = tf.constant(0.0, shape=[4, 4], dtype=np.float32)
        return ipu.loops.repeat(5, lambda v, im1, im2: v + im1 + im2, [v], infeed)

    res = _compile(my_net, [])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        return sess.run(res)


@pytest.mark.follows("testSingleInfeedRepeatTuple")
def test_single_infeed_repeat_tuple(graph):
    # Elements 0, 1, 2, 0, 1: sum of x + (x + 10) / 2 = 4 + (4 + 50) / 2 = 31.
    np.testing.assert_allclose(_tuple_repeat(False)[0], _full(31))


@pytest.mark.follows("testSingleInfeedRepeatTupleMerge")
def test_single_infeed_repeat_tuple_merge(tf1_graph):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.optimizations.merge_infeed_io_copies = True
    config.configure_ipu_system()
    try:
        np.testing.assert_allclose(_tuple_repeat(True)[0], _full(31))
    finally:
        ipu.config.reset_ipu_configuration()


@pytest.mark.follows("testSingleInfeedRepeatNamed")
def test_single_infeed_repeat_named(graph):
    dataset = _increasing(3, [4, 4]).map(lambda x: dict(zip("ab", _pair(x), strict=True)))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def body(v1_, v2_, b, a):  # the dict's values by name, in another order
        return v1_ + a, v2_ + b

    def my_net():
        zeros = tf.constant(0.0, shape=[4, 4], dtype=np.float32)
        return ipu.loops.repeat(5, body, [zeros, zeros], infeed)

    res = _compile(my_net, [])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        result = sess.run(res)
    np.testing.assert_allclose(result[0], _full(4))
    np.testing.assert_allclose(result[1], _full(27))


@pytest.mark.follows("testSingleInfeedMultipleRepeats")
def test_single_infeed_multiple_repeats(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(2, [4, 4]))

    def my_net():
        v = tf.constant(0.0, shape=[4, 4], dtype=np.float32)
        r = ipu.loops.repeat(5, lambda v, x: v + x, [v], infeed)
        return ipu.loops.repeat(5, lambda v, x: v + x, [r], infeed)

    res = _compile(my_net, [])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        np.testing.assert_allclose(sess.run(res)[0], _full(5))


@pytest.mark.follows("testSingleInfeedWhileLoopNonTuple")
def test_single_infeed_while_loop_non_tuple(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 4]))

    def my_net(v):
        return ipu.loops.while_loop(
            lambda i, v: i < 20, lambda i, v, x: (i + 1, v + x), (0, v), infeed
        )[1]

    v = _placeholder([4, 4])
    res = _compile(my_net, [v])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        result = sess.run(res, {v: np.ones([4, 4], np.float32)})
    np.testing.assert_allclose(result[0], _full(91))


@pytest.mark.follows("testSingleInfeedWhileLoopTuple")
def test_single_infeed_while_loop_tuple(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(3, [4, 4]).map(_pair))

    def my_net(v):
        return ipu.loops.while_loop(
            lambda i, v: i < 20, lambda i, v, im1, im2: (i + 1, v + im1 + im2), (0, v), infeed
        )[1]

    v = _placeholder([4, 4])
    res = _compile(my_net, [v])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        result = sess.run(res, {v: np.ones([4, 4], np.float32)})
    xs = np.array([i % 3 for i in range(20)], np.float32)
    np.testing.assert_allclose(result[0], _full(1 + np.sum(xs + (xs + 10) / 2)))  # 129.5


def _sum_program(iters, infeed):
    def my_net():
        v = tf.constant(0.0, shape=[4, 4], dtype=np.float32)
        return ipu.loops.repeat(iters, lambda v, x: v + x, (v), infeed)

    return _compile(my_net)


@pytest.mark.follows("testSingleInfeedMultipleRuns")
def test_single_infeed_multiple_runs(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 4]))
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        results = [sess.run(_sum_program(iters, infeed))[0] for iters in (0, 2, 2, 2)]
    # 0 iterations read nothing; then 0 + 1, 2 + 3, 4 + 5.
    for result, expected in zip(results, (0, 1, 5, 9), strict=True):
        np.testing.assert_allclose(result, _full(expected))


@pytest.mark.follows("testTwoInfeedsDifferentPrograms")
def test_two_infeeds_different_programs(graph):
    infeed1 = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(20, [4, 4]))
    infeed2 = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(3, [4, 4]))
    with v1.Session() as sess:
        sess.run(infeed1.initializer)
        sess.run(infeed2.initializer)
        results = [
            sess.run(_sum_program(5, feed))[0] for feed in (infeed1, infeed2, infeed1, infeed2)
        ]
    for result, expected in zip(results, (10, 4, 35, 5), strict=True):
        np.testing.assert_allclose(result, _full(expected))


@pytest.mark.follows("testUndefinedShape")
def test_undefined_shape(graph):
    dataset = _increasing(10, [4, 4]).batch(10, drop_remainder=False)
    with pytest.raises(ValueError, match=r"Output shape \((\?|None),"):
        ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)


@pytest.mark.follows("testMultipleInitializations")
def test_multiple_initializations(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 4]))
    _ = infeed.initializer
    with pytest.raises(
        ValueError, match="The IPUInfeedQueue `initializer` function can only be accessed once."
    ):
        _ = infeed.initializer


# A TF1 program whose infeed reads a file that does not exist.
_FAILING_DATASET_PROGRAM = textwrap.dedent(
    """
    import tensorflow as tf
    from tensorflow.python import ipu

    cfg = ipu.config.IPUConfig()
    cfg.ipu_model.compile_ipu_code = False
    cfg.configure_ipu_system()
    tf.compat.v1.disable_eager_execution()
    dataset = tf.data.FixedLengthRecordDataset(["this/path/doesnt/exist/"], 100)
    dataset = dataset.map(lambda f: tf.io.decode_raw(f, tf.float32)[0])
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        r = ipu.ipu_compiler.compile(infeed_queue._dequeue, [])
    with tf.compat.v1.Session() as sess:
        sess.run(infeed_queue.initializer)
        sess.run(r)
    """
)


@pytest.mark.follows("testDatasetExceptionTerminates")
def test_dataset_exception_terminates():
    # The original's infeed thread aborts the process when its dataset fails
    # (poplar_executor.cc, LOG(FATAL)): the program cannot catch it.
    result = subprocess.run(
        [sys.executable, "-c", _FAILING_DATASET_PROGRAM], stderr=subprocess.PIPE, timeout=300
    )
    assert result.returncode == -signal.SIGABRT, result.stderr.decode()[-3000:]
    assert "An infeed dataset iterator has failed" in result.stderr.decode()


def _conv_training(iters_values, outfeed=None):
    dataset = _increasing(10, [4, 4, 2]).batch(batch_size=2, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def my_net(iters):
        def body(loss, x):
            with v1.variable_scope("vs", use_resource=True):
                y = tf.keras.layers.Conv2D(
                    2,
                    1,
                    use_bias=True,
                    kernel_initializer=tf.keras.initializers.Ones(),
                    name="conv1",
                )(x)
            loss = tf.reduce_sum(y)
            train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
            with tf.control_dependencies([train]):
                if outfeed is None:
                    return tf.identity(loss)
                return tf.identity(loss), outfeed.enqueue(loss)

        return ipu.loops.repeat(iters, body, (0.0), infeed)

    iters = _placeholder([], np.int32)
    r = _compile(my_net, [iters])
    dequeued = outfeed.dequeue() if outfeed is not None else None
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(v1.global_variables_initializer())
        losses = [sess.run(r, {iters: n}) for n in iters_values]
        return losses, (sess.run(dequeued) if dequeued is not None else None)


@pytest.mark.follows("testTrainingLoopWithInfeed")
def test_training_loop_with_infeed(graph):
    (initial, final), _ = _conv_training([1, 1000])
    assert initial[0] > final[0]


@pytest.mark.follows("testMultipleOutfeedEnqueue")
@pytest.mark.parametrize("latency", [True, False])
def test_multiple_outfeed_enqueue(graph, latency):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(optimise_latency=latency)

    def body(v):
        outfeed.enqueue(v)
        return v + 1, outfeed.enqueue(v)

    v = _placeholder([4, 4])
    with pytest.raises(ValueError):
        _compile(lambda v: ipu.loops.repeat(20, body, (v)), [v])


@pytest.mark.follows("testMultipleOutfeedEnqueueDifferentGraphs")
def test_multiple_outfeed_enqueue_different_graphs(ipu_system):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_net(v):
        return ipu.loops.repeat(20, lambda v: (v + 1, outfeed.enqueue(v)), (v))

    for _ in range(2):
        with tf.Graph().as_default():
            v = _placeholder([4, 4])
            assert not outfeed.enqueued  # not enqueued in this graph
            _compile(my_net, [v])
            assert outfeed.enqueued


@pytest.mark.follows("testSingleOutfeedRepeatNonTuple")
def test_single_outfeed_repeat_non_tuple(graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    v = _placeholder([4, 4])
    res = _compile(lambda v: ipu.loops.repeat(20, lambda v: (v + 1, outfeed.enqueue(v)), (v)), [v])
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        result = sess.run(res, {v: np.ones([4, 4], np.float32)})
        outfed = sess.run(dequeued)
    np.testing.assert_allclose(result[0], _full(21))
    for i in range(20):
        np.testing.assert_allclose(outfed[i], _full(i + 1))


@pytest.mark.follows("testMultipleOutfeedsInSameGraph")
def test_multiple_outfeeds_in_same_graph(graph):
    outfeed1 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    outfeed2 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def inner_body(v):
        return v + 1, outfeed2.enqueue(v)

    def body(v):
        out = outfeed1.enqueue(v)
        return ipu.loops.repeat(10, inner_body, v), out

    v = _placeholder([])
    res = _compile(lambda v: ipu.loops.repeat(10, body, v), [v])
    dequeued1, dequeued2 = outfeed1.dequeue(), outfeed2.dequeue()
    with v1.Session() as sess:
        sess.run(res, {v: 0.0})
        out1, out2 = sess.run([dequeued1, dequeued2])
    np.testing.assert_array_equal(out1, np.arange(0, 100, step=10))
    np.testing.assert_array_equal(out2, np.arange(0, 100, step=1))


@pytest.mark.follows("testSingleInfeedOutfeedRepeatNonTuple")
def test_single_infeed_outfeed_repeat_non_tuple(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 4]))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(v, x):
        v = v + x
        return v, outfeed.enqueue(v)

    v = _placeholder([4, 4])
    res = _compile(lambda v: ipu.loops.repeat(20, body, (v), infeed), [v])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        result = sess.run(res, {v: np.ones([4, 4], np.float32)})
        outfed = sess.run(outfeed.dequeue())
    np.testing.assert_allclose(result[0], _full(91))
    assert outfed.shape == (20, 4, 4)
    np.testing.assert_allclose(outfed[-1], result[0])
    np.testing.assert_allclose(outfed[5], _full(16))


def _tuple_outfeed(mode, as_dict: bool):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(3, [4, 4]).map(_pair))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=mode)

    def body(v, im1, im2):
        v = v + im1 + im2
        values = {"v": v, "image1": im1, "image2": im2} if as_dict else (v, im1, im2)
        return v, outfeed.enqueue(values)

    def my_net():
        return ipu.loops.repeat(5, body, [tf.constant(0.0, shape=[4, 4], dtype=np.float32)], infeed)

    res = _compile(my_net, [])
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        result = sess.run(res)
        return result, sess.run(dequeued)


_XS = np.array([0, 1, 2, 0, 1], np.float32)
_V = np.cumsum(_XS + (_XS + 10) / 2)  # 5, 11.5, 19.5, 24.5, 31


@pytest.mark.follows("testSingleInfeedOutfeedRepeatTuple")
def test_single_infeed_outfeed_repeat_tuple(graph):
    result, outfed = _tuple_outfeed(ipu.ipu_outfeed_queue.IPUOutfeedMode.ALL, as_dict=False)
    np.testing.assert_allclose(result[0], _full(31))
    assert len(outfed) == 3
    for i in range(5):
        np.testing.assert_allclose(outfed[0][i], _full(_V[i]))
        np.testing.assert_allclose(outfed[1][i], _full(_XS[i]))
        np.testing.assert_allclose(outfed[2][i], _full((_XS[i] + 10) / 2))


@pytest.mark.follows("testSingleInfeedOutfeedRepeatTupleLast")
def test_single_infeed_outfeed_repeat_tuple_last(graph):
    result, outfed = _tuple_outfeed(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST, as_dict=False)
    np.testing.assert_allclose(result[0], _full(31))
    assert len(outfed) == 3
    for value, expected in zip(outfed, (31, 1, 5.5), strict=True):
        np.testing.assert_allclose(value, _full(expected))


@pytest.mark.follows("testSingleInfeedOutfeedRepeatNamed")
def test_single_infeed_outfeed_repeat_named(graph):
    result, outfed = _tuple_outfeed(ipu.ipu_outfeed_queue.IPUOutfeedMode.ALL, as_dict=True)
    np.testing.assert_allclose(result[0], _full(31))
    assert len(outfed) == 3
    for i in range(5):
        np.testing.assert_allclose(outfed["v"][i], _full(_V[i]))
        np.testing.assert_allclose(outfed["image1"][i], _full(_XS[i]))
        np.testing.assert_allclose(outfed["image2"][i], _full((_XS[i] + 10) / 2))


@pytest.mark.follows("testSingleInfeedOutfeedRepeatNamedLast")
def test_single_infeed_outfeed_repeat_named_last(graph):
    result, outfed = _tuple_outfeed(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST, as_dict=True)
    np.testing.assert_allclose(result[0], _full(31))
    assert len(outfed) == 3
    np.testing.assert_allclose(outfed["v"], _full(31))
    np.testing.assert_allclose(outfed["image1"], _full(1))
    np.testing.assert_allclose(outfed["image2"], _full(5.5))


@pytest.mark.follows("testTrainingLoopWithInfeedAndOutfeedGetAll")
def test_training_loop_with_infeed_and_outfeed_get_all(graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    (initial, final), outfed = _conv_training([1, 1000], outfeed)
    assert initial[0] > final[0]
    assert isinstance(outfed, np.ndarray)
    assert outfed.shape[0] == 1001


@pytest.mark.follows("testTrainingLoopWithInfeedAndOutfeedGetLast")
def test_training_loop_with_infeed_and_outfeed_get_last(graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(
        outfeed_mode=ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST
    )
    (initial, final), outfed = _conv_training([1, 1000], outfeed)
    assert initial[0] > final[0]
    assert outfed == final[0]
    assert isinstance(outfed, np.float32)  # a scalar, not an array


def _two_outfeed_programs():
    outfeed1 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    outfeed2 = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    v1_, v2_ = _placeholder([4, 4]), _placeholder([5, 5])
    res1 = _compile(
        lambda v: ipu.loops.repeat(5, lambda v: (v + 1, outfeed1.enqueue(v)), (v)), [v1_]
    )
    res2 = _compile(
        lambda v: ipu.loops.repeat(7, lambda v: (v + 1, outfeed2.enqueue(v)), (v)), [v2_]
    )
    feeds = {v1_: np.ones([4, 4], np.float32)}, {v2_: np.full([5, 5], 4, np.float32)}
    return (res1, res2), (outfeed1.dequeue(), outfeed2.dequeue()), feeds


def _check_two_outfeed_programs(results, outfed):
    np.testing.assert_allclose(results[0][0], _full(6))
    np.testing.assert_allclose(results[1][0], _full(11, (5, 5)))
    for i in range(5):
        np.testing.assert_allclose(outfed[0][i], _full(i + 1))
    for i in range(7):
        np.testing.assert_allclose(outfed[1][i], _full(i + 4, (5, 5)))


@pytest.mark.follows("testTwoOutfeedsDifferentPrograms")
def test_two_outfeeds_different_programs(graph):
    programs, dequeues, feeds = _two_outfeed_programs()
    with v1.Session() as sess:
        results, outfed = [], []
        for program, dequeue, feed in zip(programs, dequeues, feeds, strict=True):
            results.append(sess.run(program, feed))
            outfed.append(sess.run(dequeue))
    _check_two_outfeed_programs(results, outfed)


@pytest.mark.follows("testTwoOutfeedsDifferentProgramsDelayedOutfeedRead")
def test_two_outfeeds_different_programs_delayed_outfeed_read(graph):
    programs, dequeues, feeds = _two_outfeed_programs()
    with v1.Session() as sess:
        results = [sess.run(p, f) for p, f in zip(programs, feeds, strict=True)]
        outfed = [sess.run(d) for d in dequeues]
    _check_two_outfeed_programs(results, outfed)


@pytest.mark.follows("testOutfeedNonTensorOutputs")
def test_outfeed_non_tensor_outputs(graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body():
        with v1.variable_scope("", use_resource=True):
            w = v1.get_variable(
                "w", dtype=np.float32, shape=[1], initializer=v1.constant_initializer(2.0)
            )
        return outfeed.enqueue({101: 1, 2020: w})

    res = _compile(lambda: ipu.loops.repeat(5, body), [])
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        ipu.utils.move_variable_initialization_to_cpu()
        sess.run(v1.global_variables_initializer())
        sess.run(res)
        outfed = sess.run(dequeued)
    for i in range(5):
        np.testing.assert_allclose(outfed[101][i], 1)
        np.testing.assert_allclose(outfed[2020][i], [2.0])


@pytest.mark.follows("testInfeedUsingDatasetWithNestedDictNotUnpacked")
def test_infeed_using_dataset_with_nested_dict_not_unpacked(graph):
    x = {"x0": np.ones([2], np.float32), "x1": np.ones([2], np.float32)}
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.from_tensor_slices((x, np.ones([2], np.float32)))
    )
    res = _compile(
        lambda: ipu.loops.repeat(2, lambda t, x, y: t + x["x0"] + x["x1"] + y, [0.0], infeed)
    )
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        assert sess.run(res) == [6.0]


@pytest.mark.follows("testInfeedUsingDatasetWithOnlyDictIsUnpacked")
def test_infeed_using_dataset_with_only_dict_is_unpacked(graph):
    x = {"x0": np.ones([2], np.float32), "x1": np.ones([2], np.float32)}
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices((x,)))
    res = _compile(lambda: ipu.loops.repeat(2, lambda t, x0, x1: t + x0 + x1, [0.0], infeed))
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        assert sess.run(res) == [4.0]


@pytest.mark.follows("testInfeedDeleteBeforeInitializeShouldRaiseException")
def test_infeed_delete_before_initialize_should_raise_exception(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10))
    delete_op = infeed.deleter
    with v1.Session() as sess:
        with pytest.raises(tf.errors.NotFoundError, match="Infeed with id="):
            sess.run(delete_op)


@pytest.mark.follows("testInfeedRestart")
def test_infeed_restart(graph):
    def data_gen():
        yield from range(5)

    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.from_generator(data_gen, np.float32, ())
    )
    init_op, delete_op = infeed.initializer, infeed.deleter
    [res] = _compile(lambda v: ipu.loops.repeat(5, lambda v, x: v + x, (v), infeed), [0.0])
    with v1.Session() as sess:
        for _ in range(2):
            sess.run(init_op)
            assert sess.run(res) == sum(range(5))
            sess.run(delete_op)


@pytest.mark.follows("testInfeedOutfeedContinuousDequeuing")
def test_infeed_outfeed_continuous_dequeuing(graph):
    n = 1000
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(n, [1]))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    res = _compile(lambda: ipu.loops.repeat(n, outfeed.enqueue, [], infeed), [])
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        received: list[float] = []

        def dequeue():
            while len(received) != n:
                r = sess.run(dequeued)
                if r.size:
                    received.extend(r.flatten().tolist())

        sess.run(infeed.initializer)
        thread = threading.Thread(target=dequeue, daemon=True)
        thread.start()
        sess.run(res)
        thread.join(timeout=60)
    assert not thread.is_alive()
    np.testing.assert_allclose(received, range(n))


@pytest.mark.follows("testInfeedOutfeedContinuousDequeuingGetLastBeforeEnqueued")
def test_infeed_outfeed_continuous_dequeuing_get_last_before_enqueued(graph):
    n = 1000
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(n, [1]))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(
        outfeed_mode=ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST
    )
    _compile(lambda: ipu.loops.repeat(n, outfeed.enqueue, [], infeed), [])
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        with pytest.raises(
            tf.errors.FailedPreconditionError, match=r"Trying to get the last value from an"
        ):
            sess.run(dequeued)


@pytest.mark.follows("testCannotFeedInt64")
def test_cannot_feed_int64(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.range(5))
    _compile(lambda: ipu.loops.repeat(5, lambda v, x: v + tf.cast(x, np.int32), (0,), infeed), [])
    with v1.Session() as sess:
        with pytest.raises(
            tf.errors.FailedPreconditionError,
            # The original's kernel message alone, not wrapped as a failed assertion.
            match="^Unsupported datatype int64 on index 0 of feed operation",
        ):
            sess.run(infeed.initializer)


@pytest.mark.follows("testFeedBools")
def test_feed_bools(graph):
    left, right = [False, False, True, True], [False, True, False, True]
    dataset = tf.data.Dataset.from_tensor_slices((left, right)).batch(2, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    res = _compile(
        lambda: ipu.loops.repeat(
            2, lambda a, b: outfeed.enqueue(tf.logical_and(a, b)), infeed_queue=infeed
        ),
        [],
    )
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(res)
        out = sess.run(dequeued)
    np.testing.assert_array_equal(np.concatenate(out), np.logical_and(left, right))


@pytest.mark.follows("testHashTableInDataPipeline")
def test_hash_table_in_data_pipeline(graph):
    table = v1.lookup.StaticHashTable(
        v1.lookup.KeyValueTensorInitializer(
            tf.constant(["brain", "salad", "surgery"]), tf.constant([0, 1, 2], np.int32)
        ),
        default_value=-1,
    )
    dataset = tf.data.Dataset.from_tensor_slices(["brain brain tank salad surgery".split()]).map(
        table.lookup
    )
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    [res] = _compile(lambda: infeed._dequeue())  # the original's test reads the private dequeue
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(table.initializer)
        np.testing.assert_array_equal(sess.run(res), [0, 0, -1, 1, 2])


@pytest.mark.follows("testFeedInt8")
def test_feed_int8(graph):
    def to_pair(x):
        x = x - 5
        return x, tf.cast(x, np.uint8)

    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [], np.int8).map(to_pair))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x1, x2):
        x1 = tf.cast(tf.cast(x1, np.float16) + 1, np.int8)
        x2 = tf.cast(tf.cast(x2, np.float32) - 1, np.uint8)
        return outfeed.enqueue((x1, x2))

    res = _compile(lambda: ipu.loops.repeat(10, body, infeed_queue=infeed), [])
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(res)
        out = sess.run(dequeued)
    np.testing.assert_array_equal(out[0], [-4, -3, -2, -1, 0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(out[1], [250, 251, 252, 253, 254, 255, 0, 1, 2, 3])


@pytest.mark.follows("test8bitOps")
def test_8bit_ops(graph):
    dataset = _increasing(1, [10], np.int8).map(lambda x: (x, tf.cast(x, np.uint8)))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x1, x2):
        results = []
        for x in (x1, x2):
            results += [
                tf.identity(x),
                tf.reshape(x, [2, 5]),
                tf.expand_dims(x, 0),
                tf.broadcast_to(x, [10, 10]),
            ]
        return outfeed.enqueue(results)

    res = _compile(lambda: ipu.loops.repeat(1, body, infeed_queue=infeed), [])
    dequeued = outfeed.dequeue()
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(res)
        out = sess.run(dequeued)
    shapes = [[1, 10], [1, 2, 5], [1, 1, 10], [1, 10, 10]] * 2
    for value, shape, dtype in zip(out, shapes, [np.int8] * 4 + [np.uint8] * 4, strict=True):
        assert value.dtype == dtype
        np.testing.assert_array_equal(value, np.zeros(shape))


@pytest.mark.follows("testValidSharding")
@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_valid_sharding(ipu_system, tf1_graph):
    ipu.utils.move_variable_initialization_to_cpu()
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    images = tf.data.Dataset.from_tensors(np.ones((64, 64, 3), np.float16))
    labels = tf.data.Dataset.from_tensors(np.ones((), np.int32))
    dataset = tf.data.Dataset.zip((images, labels)).repeat(4).batch(4, drop_remainder=True).repeat()
    with tf.device("cpu"):
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    def body(images, ids):
        with v1.variable_scope("MainGraph"):
            init = v1.glorot_uniform_initializer(dtype=np.float16)
            with ipu.scopes.ipu_shard(0):
                y = tf.matmul(images, v1.get_variable("w1", [3, 64], np.float16, init))
            with ipu.scopes.ipu_shard(1):
                scores = tf.matmul(y, v1.get_variable("w2", [64, 64], np.float16, init))
        return outfeed.enqueue([scores, ids])

    step = _compile(lambda: ipu.loops.repeat(128, body, inputs=[], infeed_queue=infeed), [])
    with v1.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(v1.global_variables_initializer())
        sess.run(step)  # the original only checks that this runs


def _increasing_sum_on(ordinal):
    strategy = ipu.ipu_strategy.IPUStrategyV1(f"/device:IPU:{ordinal}")
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [4, 4]))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        infeed.initializer  # noqa: B018 - as the original, which touches it

        def body(v, x):
            v = v + x
            return v, outfeed.enqueue(v)

        @tf.function(jit_compile=True)
        def my_net(v):
            return ipu.loops.repeat(20, body, (v), infeed)

    result = strategy.run(my_net, args=(np.ones([4, 4], np.float32),))
    return result, outfeed.dequeue()


@pytest.mark.follows("testDeduceDevice")
def test_deduce_device():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [1, 1]
    config.configure_ipu_system()
    try:
        (r0, o0), (r1, o1) = _increasing_sum_on(0), _increasing_sum_on(1)
    finally:
        ipu.config.reset_ipu_configuration()
    np.testing.assert_allclose(r0, r1)
    np.testing.assert_allclose(o0, o1)
    np.testing.assert_allclose(r0, _full(91))


@pytest.mark.follows("testInfeedSpec")
def test_infeed_spec():
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(10, [], np.int8))
    with pytest.raises(RuntimeError, match="Spec for IPUInfeedQueue"):
        infeed._type_spec  # noqa: B018
    infeed.initializer  # noqa: B018
    spec = infeed._type_spec
    for name in ("_id", "_structure", "_flat_structure", "_device_ordinal", "_prefetch_depth"):
        assert getattr(spec, name) == getattr(infeed, name), name
    reference = ipu.ipu_infeed_queue.IPUInfeedQueue._from_type_spec(spec)
    assert isinstance(reference, ipu.ipu_infeed_queue.IPUInfeedQueue)
    with pytest.raises(RuntimeError, match="IPUInfeedQueue created"):
        reference.initializer  # noqa: B018
    with pytest.raises(RuntimeError, match="IPUInfeedQueue created"):
        reference.deleter  # noqa: B018


@pytest.mark.follows("testScopedOuteed")
def test_scoped_outfeed(strategy_on):
    strategy = strategy_on(1)
    outfeed = ipu.ipu_outfeed_queue.ScopedIPUOutfeedQueue()
    with strategy.scope():

        @tf.function(jit_compile=True)
        def my_net(num_iterations):
            x = tf.constant(1, dtype=np.int32, shape=[2])
            for _ in tf.range(num_iterations):
                outfeed.enqueue(x)
                x += 1

        strategy.run(my_net, args=(10,))
        assert len(outfeed.dequeue()) == 10


@pytest.mark.follows("testIPUIterator")
def test_ipu_iterator(strategy_on):
    strategy = strategy_on(1)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with strategy.scope():

        @tf.function(jit_compile=True)
        def my_net(num_iterations, iterator):
            x = tf.constant(1, dtype=np.int32, shape=[1])
            for _ in tf.range(num_iterations):
                outfeed.enqueue(next(iterator) + x)
                x += 1

        # The original's create_single_increasing_dataset gives 1-tuples: `next()` + x
        # then broadcasts to [1, 1].
        dataset = _increasing(10, [1], np.int32).map(lambda x: (x,))
        iterator = ipu.ipu_infeed_queue.IPUIterator(dataset=dataset)
        strategy.run(my_net, args=(5, iterator))
        np.testing.assert_array_equal(outfeed.dequeue(), [[[1]], [[3]], [[5]], [[7]], [[9]]])


@pytest.mark.follows("testCreation")
def test_outfeed_iterator_creation():
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    assert isinstance(iter(outfeed), ipu.ipu_outfeed_queue.IPUOutfeedQueueIterator)
    with pytest.raises(RuntimeError, match="IPUOutfeedQueue can only be iterated"):
        iter(
            ipu.ipu_outfeed_queue.IPUOutfeedQueue(
                outfeed_mode=ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST
            )
        )


@pytest.mark.follows("testOutputs")
@pytest.mark.parametrize("replication_factor", [1, 2])
def test_outfeed_iterator_outputs(strategy_on, replication_factor):
    strategy = strategy_on(replication_factor)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    lead = [replication_factor] if replication_factor > 1 else []
    with strategy.scope():

        @tf.function(jit_compile=True)
        def my_net(num_iterations):
            x = tf.constant(1, dtype=np.int32, shape=[2])
            y = tf.constant(2, dtype=np.int32, shape=[])
            for _ in tf.range(num_iterations):
                outfeed.enqueue((x, y))
                x += 1
                y *= 2

        def results():
            got = []
            for i, (x, y) in enumerate(outfeed):
                np.testing.assert_array_equal(x, np.full(lead + [2], 1 + i))
                np.testing.assert_array_equal(y, np.full(lead, 2 ** (i + 1)))
                got.append((x, y))
            return got

        with pytest.raises(StopIteration):
            next(iter(outfeed))
        strategy.run(my_net, args=(10,))
        assert len(results()) == 10
        assert len(results()) == 0
        strategy.run(my_net, args=(5,))
        assert len(results()) == 5


@pytest.mark.follows("testParallelDequeue")
def test_parallel_dequeue(strategy_on):
    strategy = strategy_on(1)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    n = 100
    with strategy.scope():

        @tf.function(jit_compile=True)
        def my_net(num_iterations):
            x = tf.constant(1, dtype=np.int32, shape=[2])
            for _ in tf.range(num_iterations):
                outfeed.enqueue({"key": x})
                x += 1

        results = []
        problems = []

        def get_results():
            x_ref = 1
            while len(results) != n:
                for z in outfeed:
                    if not isinstance(z, dict) or not np.array_equal(z["key"], np.full([2], x_ref)):
                        problems.append(z)
                    x_ref += 1
                    results.append(x_ref)

        thread = threading.Thread(target=get_results, daemon=True)
        thread.start()
        strategy.run(my_net, args=(n,))
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert not problems
    assert len(results) == n


@pytest.mark.follows("testDim0Infeed")
def test_dim0_infeed(graph):
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing(5, [1, 0]))
    _compile(
        lambda: ipu.loops.repeat(5, lambda c, x: c, [tf.constant(1, np.int32, [2])], infeed), []
    )
    with v1.Session() as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match="Detected an input tensor to an infeed queue with a dimension of size 0",
        ):
            sess.run(infeed.initializer)


@pytest.mark.follows("testDim0Outfeed")
def test_dim0_outfeed(graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    res = _compile(
        lambda: ipu.loops.repeat(
            5, lambda c: (c, outfeed.enqueue(c)), [tf.constant(1, np.int32, [2, 0])]
        ),
        [],
    )
    with v1.Session() as sess:
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match="Detected an input tensor to an outfeed queue with a dimension of size 0",
        ):
            sess.run(res)
