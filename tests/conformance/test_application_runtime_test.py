"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/application_runtime_test.py`.

The original's TF1 uses of application_compile_op and the embedded runtime: compile in a
session, reset the IPU configuration, then run the executable from sessions (one or
several, from one thread or several, on one runtime instance or several) with fed
placeholders. Where the original drives its runtime ops (`gen_application_runtime`)
directly, these tests use the public `embedded_runtime` functions that wrap them.
"""

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


def _configure(ipus=1, div0=False, io_tiles=0):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = ipus
    config.floating_point_behaviour.div0 = div0
    if io_tiles:
        config.io_tiles.num_io_tiles = io_tiles
        config.io_tiles.place_ops_on_io_tiles = True
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


L1_SIZE, L2_SIZE, L3_SIZE, NUM_PIXELS, BATCH_SIZE = 320, 72, 10, 784, 16
NUM_ITERATIONS, NUM_ENGINE_ITERATIONS, NUM_ENGINES, NUM_THREADS_PER_ENGINE = 8, 2, 2, 4


def _dense_layer(size, inputs, scope):
    with tf.compat.v1.variable_scope(scope, reuse=tf.compat.v1.AUTO_REUSE, use_resource=True):
        initializer = tf.compat.v1.glorot_uniform_initializer()
        w = tf.compat.v1.get_variable("weight", [inputs.shape[-1], size], initializer=initializer)
        b = tf.compat.v1.get_variable("bias", [size], initializer=initializer)
        return tf.compat.v1.nn.relu_layer(inputs, w, b)


def _mnist_executable(path, pipelined):
    """The original's three dense layers (pipelined over two IPUs, or in a device loop),
    compiled with frozen weights; returns the weights by layer name."""
    dataset = tf.data.Dataset.from_tensors((tf.zeros([NUM_PIXELS]),)).repeat()
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(BATCH_SIZE, True))
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage1(images):
        return _dense_layer(L1_SIZE, images, "d1")

    def stage2(relu1):
        return _dense_layer(L3_SIZE, _dense_layer(L2_SIZE, relu1, "d2"), "d3")

    def my_net():
        if pipelined:
            return ipu.pipelining_ops.pipeline(
                [stage1, stage2],
                gradient_accumulation_count=2,
                repeat_count=NUM_ITERATIONS // 2,
                infeed_queue=infeed_queue,
                outfeed_queue=outfeed_queue,
                pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Interleaved,
            )

        def body(images):
            return outfeed_queue.enqueue({"predictions": stage2(stage1(images))})

        return ipu.loops.repeat(NUM_ITERATIONS, body, [], infeed_queue)

    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        _configure(ipus=2 if pipelined else 1)
        compile_op = ipu.application_compile_op.experimental_application_compile_op(
            my_net, output_path=str(path), freeze_variables=True
        )
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(compile_op)
        weights = {v.op.name: session.run(v) for v in tf.compat.v1.global_variables()}
    ipu.config.reset_ipu_configuration()
    return weights


def _mnist_reference(weights, images):
    x = images
    for layer in ("d1", "d2", "d3"):
        x = np.maximum(x @ weights[f"{layer}/weight"] + weights[f"{layer}/bias"], 0.0)
    return x


# The original's combinations that run (its `test` returns early for the others).
RUNTIME_CASES = [
    (pipelined, sessions, threads, engines)
    for pipelined in (False, True)
    for sessions in (False, True)
    for threads in (False, True)
    for engines in (False, True)
    if not ((sessions or engines or pipelined) and not threads) and not (engines and not sessions)
]


@pytest.mark.follows("test")
@pytest.mark.slow
@pytest.mark.parametrize(
    "pipelined,multiple_sessions,multiple_threads,multiple_engines", RUNTIME_CASES
)
def test_runtime_from_threads_sessions_and_engines(
    tmp_path, pipelined, multiple_sessions, multiple_threads, multiple_engines
):
    path = str(tmp_path / "application.poplar_exec")
    weights = _mnist_executable(path, pipelined)
    threads = (NUM_ENGINES if multiple_engines else 1) * (
        NUM_THREADS_PER_ENGINE if multiple_threads else 1
    )
    calls = NUM_ENGINE_ITERATIONS * NUM_ITERATIONS
    images = np.random.RandomState(1).rand(threads, calls, BATCH_SIZE, NUM_PIXELS)
    images = images.astype(np.float32)
    output = np.zeros([threads, calls, BATCH_SIZE, L3_SIZE], np.float32)
    prefix = f"engine_pipelined_{pipelined}_{multiple_sessions}_{multiple_threads}"

    def call_op(thread):
        name = f"{prefix}_{thread % NUM_ENGINES}" if multiple_engines else prefix
        context = ipu.embedded_runtime.embedded_runtime_start(path, [], name)
        placeholder = tf.compat.v1.placeholder(tf.float32, [BATCH_SIZE, NUM_PIXELS])
        return placeholder, ipu.embedded_runtime.embedded_runtime_call([placeholder], context)

    def run_calls(session, placeholder, result, thread):
        for call in range(calls):
            (output[thread, call],) = session.run(result, {placeholder: images[thread, call]})

    def in_own_session(thread):
        with tf.Graph().as_default(), tf.compat.v1.Session() as session:
            run_calls(session, *call_op(thread), thread)

    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        shared = call_op(0)
        session.graph.finalize()

        def worker(thread):
            if multiple_sessions:
                in_own_session(thread)
            else:
                run_calls(session, *shared, thread)

        if multiple_threads:
            workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
            for thread in workers:
                thread.start()
            for thread in workers:
                thread.join()
        else:
            for thread in range(threads):
                worker(thread)
    np.testing.assert_allclose(output, _mnist_reference(weights, images), rtol=1e-4, atol=1e-5)


@pytest.mark.follows("test_pipeline_flush")
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


@pytest.mark.follows("test_io_overlap_flush")
def test_io_overlap_flush(graph, tmp_path):
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(_increasing_batches())
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return outfeed_queue.enqueue(tf.reduce_sum(x @ tf.constant(1.0, shape=[2, 2])))

    def my_net():
        return ipu.loops.repeat(10, body, [], infeed_queue)

    with tf.compat.v1.Session() as session:
        _configure(io_tiles=32)  # the original's: I/O tiles make the loop able to stall
        _compile(session, my_net, tmp_path / "application.poplar_exec")
        context = ipu.embedded_runtime.embedded_runtime_start(
            str(tmp_path / "application.poplar_exec"), [], "io_overlap_flush"
        )
        input_data = tf.compat.v1.placeholder(np.float32, shape=[2, 2])
        result = ipu.embedded_runtime.embedded_runtime_call([input_data], context)
        assert session.run(result, {input_data: np.full([2, 2], 1.0, np.float32)})[0] == 8.0
        assert session.run(result, {input_data: np.full([2, 2], 2.0, np.float32)})[0] == 16.0


@pytest.mark.follows("test_multiple_infeeds")
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


@pytest.mark.follows("test_embedded_runtime_exception")
@pytest.mark.follows("test_reset_engine")
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


@pytest.mark.follows("test_embedded_runtime_wrapper")
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


@pytest.fixture
def unfrozen(ipu_system, tmp_path):
    """An executable of `x @ weight + bias` whose two variables are start-up inputs."""
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
    return path


def test_start_up_inputs_are_named_by_the_variables(unfrozen):
    context = ipu.embedded_runtime.embedded_runtime_start(
        unfrozen, [np.ones([4, 3], np.float32), np.zeros([3], np.float32)], "names"
    )
    assert [s.name for s in context.signature().inputs] == [
        "XLA_Args/d1/weight",
        "XLA_Args/d1/bias",
    ]


@pytest.mark.follows("test_embedded_runtime_input_error")
def test_embedded_runtime_input_error(unfrozen):
    with pytest.raises(
        Exception,
        match="Failed to find input tensor with name 'XLA_Args/d1/bias' in input dictionary.",
    ):
        ipu.embedded_runtime.embedded_runtime_start(
            unfrozen, {"XLA_Args/d1/weight": np.ones([4, 3], np.float32)}, "missing"
        )


@pytest.mark.follows("test_embedded_runtime_no_list")
def test_embedded_runtime_no_list(unfrozen):
    with pytest.raises(Exception, match="Expected the inputs to be a list."):
        ipu.embedded_runtime.embedded_runtime_start(unfrozen, 4, "no_list")


@pytest.mark.follows("test_embedded_runtime_too_many_inputs")
def test_embedded_runtime_too_many_inputs(unfrozen):
    with pytest.raises(
        Exception, match="Embedded application runtime expects 2 inputs, but 3 were provided."
    ):
        ipu.embedded_runtime.embedded_runtime_start(
            unfrozen, [np.ones([3], np.float32)] * 3, "too_many"
        )


@pytest.mark.follows("test_embedded_runtime_too_few_inputs")
def test_embedded_runtime_too_few_inputs(unfrozen):
    with pytest.raises(
        Exception, match="Embedded application runtime expects 2 inputs, but 1 were provided."
    ):
        ipu.embedded_runtime.embedded_runtime_start(
            unfrozen, [np.ones([4, 3], np.float32)], "too_few"
        )


@pytest.mark.follows("test_embedded_runtime_wrong_shape")
def test_embedded_runtime_wrong_shape(unfrozen):
    with pytest.raises(
        Exception,
        match=r"Mismatched input shape at position 1 \('XLA_Args/d1/bias'\). "
        r"Expected \[3\], but input 1 has shape \[4, 3\].",
    ):
        ipu.embedded_runtime.embedded_runtime_start(
            unfrozen, [np.ones([4, 3], np.float32)] * 2, "wrong_shape"
        )


@pytest.mark.follows("test_embedded_runtime_wrong_type")
def test_embedded_runtime_wrong_type(unfrozen):
    with pytest.raises(
        Exception,
        match=r"Mismatched input dtype at position 1 \('XLA_Args/d1/bias'\). "
        r"Expected <dtype: 'float32'>, but input 1 has dtype int32.",
    ):
        ipu.embedded_runtime.embedded_runtime_start(
            unfrozen, [np.ones([4, 3], np.float32), np.ones([3], np.int32)], "wrong_type"
        )
    assert os.path.exists(unfrozen)


@pytest.mark.follows("test_large_input_count")
def test_large_input_count(graph, tmp_path):
    shapes = [(), (1, 5), (5, 1)] + [()] * 9
    dataset = tf.data.Dataset.from_tensors(tuple(np.ones(s, np.float32) for s in shapes))
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.repeat())
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(*inputs):
        result = inputs[0] + tf.matmul(inputs[1], inputs[2])
        for value in inputs[3:]:
            result = result + value
        return outfeed_queue.enqueue({"result": result})

    with tf.compat.v1.Session() as session:
        _configure()
        _compile(
            session,
            lambda: ipu.loops.repeat(16, body, [], infeed_queue),
            tmp_path / "large.poplar_exec",
        )
    context = ipu.embedded_runtime.embedded_runtime_start(
        str(tmp_path / "large.poplar_exec"), [], "my_engine"
    )
    placeholders = [tf.compat.v1.placeholder(np.float32, shape=s) for s in shapes]
    call_result = ipu.embedded_runtime.embedded_runtime_call(placeholders, context)
    rng = np.random.RandomState(0)
    for _ in range(16):
        values = [np.asarray(rng.rand(*s), np.float32) for s in shapes]
        with tf.compat.v1.Session() as session:
            (result,) = session.run(call_result, dict(zip(placeholders, values, strict=True)))
        expected = values[0] + values[1] @ values[2] + sum(values[3:])
        np.testing.assert_allclose(result, expected, rtol=1e-5)


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
