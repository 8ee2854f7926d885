"""The original's TF1 uses of application_compile_op and the embedded runtime (its
tests/application_runtime_test.py, by intent): compile in a session, reset the IPU
configuration, then run the executable from a session with fed placeholders."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g
    ipu.config.reset_ipu_configuration()


def _configure(ipus=1, div0=False):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    config.floating_point_behaviour.div0 = div0
    config.configure_ipu_system()


def _increasing_batches():
    dataset = tf.data.Dataset.range(5).map(lambda v: tf.fill([2], tf.cast(v, tf.float32)))
    return dataset.repeat().batch(batch_size=2, drop_remainder=True)


def _compile(session, function, path):
    compile_op = ipu.application_compile_op.experimental_application_compile_op(
        function, output_path=str(path)
    )
    assert session.run(compile_op) == str(path).encode()
    ipu.config.reset_ipu_configuration()  # the runtime needs no configured system


def test_pipeline_flush(graph, tmp_path):
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing_batches())
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage1(x):
        return x @ tf.constant(1.0, shape=[2, 2])

    def stage2(x):
        return tf.reduce_sum(x)

    def my_net():
        return ipu.pipelining_ops.pipeline(
            [stage1, stage2], 12, infeed_queue=infeed_queue, outfeed_queue=outfeed_queue
        )

    with tf.compat.v1.Session() as session:
        _configure(ipus=2)
        _compile(session, my_net, tmp_path / "application.poplar_exec")
        context = ipu.embedded_runtime.embedded_runtime_start(
            str(tmp_path / "application.poplar_exec"), [], "pipeline_flush"
        )
        input_data = tf.compat.v1.placeholder(np.float32, shape=[2, 2])
        result = ipu.embedded_runtime.embedded_runtime_call([input_data], context)
        # One element where a run takes twelve: the timeout lets it run (flushed).
        ones = session.run(result, {input_data: np.full([2, 2], 1.0, np.float32)})
        twos = session.run(result, {input_data: np.full([2, 2], 2.0, np.float32)})
    np.testing.assert_allclose(ones[0], (np.ones([2, 2]) @ np.ones([2, 2])).sum())
    np.testing.assert_allclose(twos[0], (np.full([2, 2], 2.0) @ np.ones([2, 2])).sum())


def test_io_overlap_flush(graph, tmp_path):
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing_batches())
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return outfeed_queue.enqueue(tf.reduce_sum(x @ tf.constant(1.0, shape=[2, 2])))

    def my_net():
        return ipu.loops.repeat(10, body, [], infeed_queue)

    with tf.compat.v1.Session() as session:
        _configure()
        _compile(session, my_net, tmp_path / "application.poplar_exec")
        context = ipu.embedded_runtime.embedded_runtime_start(
            str(tmp_path / "application.poplar_exec"), [], "io_overlap_flush"
        )
        input_data = tf.compat.v1.placeholder(np.float32, shape=[2, 2])
        result = ipu.embedded_runtime.embedded_runtime_call([input_data], context)
        assert session.run(result, {input_data: np.full([2, 2], 1.0, np.float32)})[0] == 8.0
        assert session.run(result, {input_data: np.full([2, 2], 2.0, np.float32)})[0] == 16.0


def test_multiple_infeeds(graph, tmp_path):
    a, b, c = (np.array(v, np.float32) for v in ([2, 3], [4, 5], [6, 7]))
    dataset = tf.data.Dataset.from_tensor_slices((a, b, c)).cache().repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(2, drop_remainder=True))
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x, y, z):
        return outfeed_queue.enqueue({"result": x * y + z})

    def my_net():
        return ipu.loops.repeat(1, body, [], infeed_queue)

    placeholders = [tf.compat.v1.placeholder(tf.float32, shape=[2], name=n) for n in "abc"]
    with tf.compat.v1.Session() as session:
        _configure()
        _compile(session, my_net, tmp_path / "multiple.poplar_exec")
        context = ipu.embedded_runtime.embedded_runtime_start(
            str(tmp_path / "multiple.poplar_exec"), [], "multiple_infeeds"
        )
        result = ipu.embedded_runtime.embedded_runtime_call(placeholders, context)
        outputs = session.run(result, dict(zip(placeholders, (a, b, c), strict=True)))
    np.testing.assert_allclose(outputs[0], a * b + c)  # [14, 22]


def _dividing_executable(tmp_path):
    dataset = tf.data.Dataset.from_tensors(tf.constant(1.0, shape=[1])).repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_net():
        return ipu.loops.repeat(16, lambda x: outfeed_queue.enqueue(12.0 / x), [], infeed_queue)

    path = tmp_path / "dividing.poplar_exec"
    with tf.compat.v1.Session() as session:
        _configure(div0=True)
        _compile(session, my_net, path)
    return str(path)


def test_a_floating_point_trap_is_an_internal_error_and_the_next_run_works(graph, tmp_path):
    path = _dividing_executable(tmp_path)
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "trapping", timeout=1000)
    input_data = tf.compat.v1.placeholder(np.float32, shape=[1])
    result = ipu.embedded_runtime.embedded_runtime_call([input_data], context)
    with tf.compat.v1.Session() as session:
        assert session.run(result, {input_data: [1.0]})[0] == [12.0]
        with pytest.raises(
            tf.errors.InternalError,
            match=r"\[Poplar\]\[Execute engine\] application_runtime_error: \[Recovery "
            r"action: IPU_RESET\] Tiles in excepted state [\s\S]* IPU will be "
            r"reset the next time a program is executed.",
        ):
            session.run(result, {input_data: [0.0]})
        assert session.run(result, {input_data: [3.0]})[0] == [4.0]


def _unfrozen_executable(tmp_path):
    dataset = tf.data.Dataset.from_tensors(tf.zeros([2, 4])).repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with tf.compat.v1.variable_scope("d1", use_resource=True):
        weight = tf.compat.v1.get_variable("weight", initializer=tf.ones([4, 3]))
        bias = tf.compat.v1.get_variable("bias", initializer=tf.zeros([3]))

    def my_net():
        def body(x):
            return outfeed_queue.enqueue(tf.matmul(x, weight) + bias)

        return ipu.loops.repeat(1, body, [], infeed_queue)

    path = tmp_path / "unfrozen.poplar_exec"
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        _configure()
        compile_op = ipu.application_compile_op.experimental_application_compile_op(
            my_net, output_path=str(path), freeze_variables=False
        )
        session.run(compile_op)
    ipu.config.reset_ipu_configuration()
    return str(path)


def test_start_up_inputs_are_fed_placeholders_named_by_the_variables(graph, tmp_path):
    path = _unfrozen_executable(tmp_path)
    weight = np.arange(12, dtype=np.float32).reshape(4, 3)
    bias = np.array([1.0, 2.0, 3.0], np.float32)
    feeds = {
        "XLA_Args/d1/weight": tf.compat.v1.placeholder(tf.float32, [4, 3]),
        "XLA_Args/d1/bias": tf.compat.v1.placeholder(tf.float32, [3]),
    }
    context = ipu.embedded_runtime.embedded_runtime_start(path, feeds, "fed_inputs")
    images = tf.compat.v1.placeholder(tf.float32, [2, 4])
    result = ipu.embedded_runtime.embedded_runtime_call([images], context)
    x = np.ones([2, 4], np.float32)
    with tf.compat.v1.Session() as session:
        (y,) = session.run(
            result,
            {
                images: x,
                feeds["XLA_Args/d1/weight"]: weight,
                feeds["XLA_Args/d1/bias"]: bias,
            },
        )
    np.testing.assert_allclose(y, x @ weight + bias)


def test_start_up_input_errors_are_the_originals(ipu_system, tmp_path):
    weight = tf.Variable(np.ones([4, 3], np.float32), name="d1/weight")
    bias = tf.Variable(np.zeros([3], np.float32), name="d1/bias")
    dataset = tf.data.Dataset.from_tensors(tf.zeros([2, 4])).repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def my_net():
        return ipu.loops.repeat(
            1, lambda x: outfeed_queue.enqueue(tf.matmul(x, weight) + bias), [], infeed_queue
        )

    path = str(tmp_path / "unfrozen.poplar_exec")
    ipu.application_compile_op.experimental_application_compile_op(
        my_net, output_path=path, freeze_variables=False
    )
    start = ipu.embedded_runtime.embedded_runtime_start
    names = [s.name for s in ipu.embedded_runtime.embedded_runtime_start(
        path, [np.ones([4, 3], np.float32), np.zeros([3], np.float32)], "names"
    ).signature().inputs]  # fmt: skip
    assert names == ["XLA_Args/d1/weight", "XLA_Args/d1/bias"]
    with pytest.raises(
        Exception,
        match="Failed to find input tensor with name 'XLA_Args/d1/bias' in input dictionary.",
    ):
        start(path, {"XLA_Args/d1/weight": np.ones([4, 3], np.float32)}, "missing")
    with pytest.raises(Exception, match="Expected the inputs to be a list."):
        start(path, 4, "no_list")
    with pytest.raises(
        Exception, match="Embedded application runtime expects 2 inputs, but 3 were provided."
    ):
        start(path, [np.ones([3], np.float32)] * 3, "too_many")
    with pytest.raises(
        Exception,
        match=r"Mismatched input shape at position 1 \('XLA_Args/d1/bias'\). "
        r"Expected \[3\], but input 1 has shape \[4, 3\].",
    ):
        start(path, [np.ones([4, 3], np.float32)] * 2, "wrong_shape")
    with pytest.raises(
        Exception,
        match=r"Mismatched input dtype at position 1 \('XLA_Args/d1/bias'\). "
        r"Expected <dtype: 'float32'>, but input 1 has dtype int32.",
    ):
        start(path, [np.ones([4, 3], np.float32), np.ones([3], np.int32)], "wrong_type")
    assert os.path.exists(path)


def _sgd_losses(w, b, x, y, steps, lr):
    """numpy: the loss of each SGD step of `mean((x @ w + b - y)^2)`, and the new weights."""
    losses = []
    for _ in range(steps):
        error = x @ w + b - y
        losses.append(float(np.mean(error**2)))
        grad = 2.0 * error / error.size
        w, b = w - lr * x.T @ grad, b - lr * grad.sum(axis=0)
    return losses, w, b


def test_a_training_loop_updates_the_runtimes_variables_run_after_run(tmp_path):
    # The original's test_compile_training_loop, run: a TF1 loop whose body builds a Dense
    # layer and a GradientDescentOptimizer; its variables are start-up inputs the runtime
    # keeps and the program updates, run after run.
    path = tmp_path / "train.poplar_exec"
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        _configure()
        dataset = tf.data.Dataset.from_tensors(
            (np.zeros((1, 3), np.float32), np.zeros((1, 1), np.float32))
        )
        infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.repeat())
        outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(lr, x, y):
            with tf.compat.v1.variable_scope("vs", use_resource=True):
                predictions = tf.compat.v1.layers.Dense(units=1)(x)
            loss = tf.reduce_mean(tf.square(predictions - y))
            train_op = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss)
            with tf.control_dependencies([train_op]):
                return lr, outfeed_queue.enqueue(loss)

        compile_op = ipu.application_compile_op.experimental_application_compile_op(
            lambda lr: ipu.loops.repeat(4, body, lr, infeed_queue),
            inputs=[0.1],
            output_path=str(path),
        )
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(compile_op)
        ipu.config.reset_ipu_configuration()
    w = np.array([[0.5], [-0.25], [1.0]], np.float32)
    b = np.array([0.1], np.float32)
    context = ipu.embedded_runtime.embedded_runtime_start(
        str(path),
        {"XLA_Args/vs/dense/kernel": w, "XLA_Args/vs/dense/bias": b},
        "trainer",
        timeout=10**7,
    )
    signature = context.signature()
    assert [len(signature.inputs), len(signature.outputs)] == [2, 3]
    rng = np.random.RandomState(3)
    want_w, want_b = w.astype(np.float64), b.astype(np.float64)
    for run in range(2):
        # One run's four elements are alike, so the order the calls join it in is free.
        x, y = rng.rand(1, 3).astype(np.float32), rng.rand(1, 1).astype(np.float32)
        results = []

        def call(x=x, y=y, results=results):
            results.append(ipu.embedded_runtime.embedded_runtime_call([x, y], context)[0].numpy())

        threads = [threading.Thread(target=call) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        want, want_w, want_b = _sgd_losses(want_w, want_b, x, y, 4, 0.1)
        np.testing.assert_allclose(sorted(results, reverse=True), want, rtol=1e-5, err_msg=run)
