"""application_compile_op and the embedded runtime, as the original's tutorial uses them:
compile a device loop over an infeed into an executable, start it, call it."""

from __future__ import annotations

import os
import tempfile
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

from openipu._src.engine.executable import executable_file

WEIGHTS = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0


def _read_next(iterator):
    """The iterator's next element, read in a function: an iterator made in an IPUStrategy
    scope refuses eager reads (the original's ipu_infeed_queue.IPUOwnedIterator)."""
    return tf.function(lambda: next(iterator))()


def _compile_loop(path, iterations, freeze_variables=True):
    """A model `relu(x @ w + 1)` in a device loop of `iterations` steps, compiled to `path`."""
    w = tf.Variable(WEIGHTS, name="w")
    dataset = tf.data.Dataset.from_tensors(tf.zeros([2, 4])).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return outfeed.enqueue([tf.nn.relu(tf.matmul(x, w) + 1.0), tf.reduce_sum(x)])

    def my_net():
        return ipu.loops.repeat(iterations, body, [], infeed)

    result = ipu.application_compile_op.experimental_application_compile_op(
        my_net, output_path=str(path), freeze_variables=freeze_variables
    )
    return result, w


def _expected(x, weights=WEIGHTS):
    return np.maximum(x @ weights + 1.0, 0.0), x.sum()


def test_compile_then_start_and_call_eagerly(ipu_system, tmp_path):
    path, _ = _compile_loop(tmp_path / "model.poplar_exec", iterations=1)
    assert path.numpy().decode() == str(tmp_path / "model.poplar_exec")
    x = np.random.RandomState(0).rand(2, 4).astype(np.float32)
    (y, total), context = ipu.embedded_runtime.embedded_runtime_start_and_call(
        path, [], [x], "eager_engine"
    )
    want_y, want_total = _expected(x)
    np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-6)
    np.testing.assert_allclose(total.numpy(), want_total, rtol=1e-6)
    assert isinstance(context, ipu.embedded_runtime.RuntimeContext)
    assert context.name() == "eager_engine"
    assert context.output_types() == [tf.float32, tf.float32]
    assert [s.name for s in context.signature().streamed_inputs] == ["input_0"]
    assert context.signature().streamed_inputs[0].shape.dimensions == [2, 4]


def test_calls_inside_a_tf_function(ipu_system, tmp_path):
    path, _ = _compile_loop(tmp_path / "model.poplar_exec", iterations=1)
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "function_engine")

    @tf.function
    def serve(x):
        return ipu.embedded_runtime.embedded_runtime_call([x], context)

    x = np.ones([2, 4], np.float32)
    y, total = serve(x)
    assert y.shape == (2, 3)
    np.testing.assert_allclose(y.numpy(), _expected(x)[0], rtol=1e-6)
    np.testing.assert_allclose(total.numpy(), 8.0)


def test_unfrozen_variables_are_start_up_inputs(ipu_system, tmp_path):
    path, w = _compile_loop(tmp_path / "model.poplar_exec", iterations=1, freeze_variables=False)
    context = ipu.embedded_runtime.embedded_runtime_start(
        path, {"XLA_Args/w": np.full([4, 3], 2.0, np.float32)}, "unfrozen_engine"
    )
    x = np.ones([2, 4], np.float32)
    y, _ = ipu.embedded_runtime.embedded_runtime_call([x], context)
    np.testing.assert_allclose(y.numpy(), np.full([2, 3], 9.0))


def test_frozen_variables_keep_their_value_at_compile_time(ipu_system, tmp_path):
    path, w = _compile_loop(tmp_path / "model.poplar_exec", iterations=1)
    w.assign(np.zeros_like(WEIGHTS))  # after compiling: the executable holds the old value
    x = np.ones([2, 4], np.float32)
    (y, _), _ = ipu.embedded_runtime.embedded_runtime_start_and_call(path, [], [x], "frozen")
    np.testing.assert_allclose(y.numpy(), _expected(x)[0], rtol=1e-6)


def test_many_threads_get_their_own_results(ipu_system, tmp_path):
    # Four elements per device run: calls from 12 threads are gathered into runs.
    path, _ = _compile_loop(tmp_path / "model.poplar_exec", iterations=4)
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "threads", timeout=200000)
    inputs = {i: np.random.RandomState(i).rand(2, 4).astype(np.float32) for i in range(12)}
    results, errors = {}, []

    def client(i):
        try:
            y, total = ipu.embedded_runtime.embedded_runtime_call([inputs[i]], context)
            results[i] = (y.numpy(), total.numpy())
        except Exception as error:  # noqa: BLE001 - reported by the test below
            errors.append(error)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for i, x in inputs.items():
        np.testing.assert_allclose(results[i][0], _expected(x)[0], rtol=1e-6)
        np.testing.assert_allclose(results[i][1], _expected(x)[1], rtol=1e-6)


def test_a_lone_call_of_a_plain_loop_runs_its_step_without_waiting(ipu_system, tmp_path):
    # The original runs a loop that cannot stall (no pipeline) step by step as elements
    # arrive, and never times out (application_runtime.cc, PeekInputData): a lone call
    # of a 4-step loop gets its step's results at once, whatever the timeout.
    path, _ = _compile_loop(tmp_path / "model.poplar_exec", iterations=4)
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "lonely", timeout=30 * 10**6)
    x = np.full([2, 4], 3.0, np.float32)
    ipu.embedded_runtime.embedded_runtime_call([x], context)  # loads the executable
    started = time.monotonic()
    y, total = ipu.embedded_runtime.embedded_runtime_call([x], context)
    assert time.monotonic() - started < 15.0  # not the 30 s timeout
    np.testing.assert_allclose(y.numpy(), _expected(x)[0], rtol=1e-6)
    np.testing.assert_allclose(total.numpy(), 24.0)


def test_a_plain_loop_runs_only_the_steps_it_is_given(ipu_system, tmp_path):
    # A running count: three lone calls of a 4-step loop are three steps, not three runs
    # of four (no dummy steps: the original never pushes dummy data into such a loop).
    count = tf.Variable(0.0)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensors(1.0).repeat())
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        count.assign_add(x)
        return outfeed.enqueue(count.read_value())

    path = ipu.application_compile_op.experimental_application_compile_op(
        lambda: ipu.loops.repeat(4, body, [], infeed),
        output_path=str(tmp_path / "count.poplar_exec"),
        freeze_variables=False,
    )
    context = ipu.embedded_runtime.embedded_runtime_start(path, [np.float32(0)], "counting")
    got = [
        ipu.embedded_runtime.embedded_runtime_call([np.float32(x)], context)[0] for x in (1, 2, 3)
    ]
    np.testing.assert_allclose([g.numpy() for g in got], [1.0, 3.0, 6.0])


def test_with_io_tiles_a_plain_loop_can_stall_and_waits_the_timeout(ipu_system, tmp_path):
    # I/O tiles make any loop able to stall on the original (poplar_compiler.cc,
    # ModuleExecutionCanStall): a lone call waits the timeout, then dummy data fills the run.
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.io_tiles.num_io_tiles = 32
    config.io_tiles.place_ops_on_io_tiles = True
    config.configure_ipu_system()
    path, _ = _compile_loop(tmp_path / "io_tiles.poplar_exec", iterations=4)
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "io_tiles", timeout=1_500_000)
    x = np.full([2, 4], 2.0, np.float32)
    started = time.monotonic()
    y, total = ipu.embedded_runtime.embedded_runtime_call([x], context)
    assert time.monotonic() - started >= 1.5
    np.testing.assert_allclose(y.numpy(), _expected(x)[0], rtol=1e-6)
    np.testing.assert_allclose(total.numpy(), 16.0)


def _pipeline_executable(path, count):
    """An inference pipeline `(x + 1) * 2` over `count` mini-batches, compiled to `path`."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.from_tensors(tf.zeros([2])).repeat()
    )
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def program():
        return ipu.pipelining_ops.pipeline(
            computational_stages=[lambda x: x + 1.0, lambda x: x * 2.0],
            gradient_accumulation_count=count,
            infeed_queue=infeed,
            outfeed_queue=outfeed,
            device_mapping=[0, 0],
        )

    return ipu.application_compile_op.experimental_application_compile_op(
        program, output_path=str(path)
    )


def test_a_stalled_pipeline_waits_the_timeout_then_runs_on_dummy_data(ipu_system, tmp_path):
    # A pipeline can stall (poplar_compiler.cc, ModuleExecutionCanStall): the original waits
    # `timeout` microseconds for more data, then pushes dummy data, whose results no caller
    # gets (application_runtime.cc). 4 calls fill a 4-step run, which does not wait.
    path = _pipeline_executable(tmp_path / "pipeline.poplar_exec", count=4)
    x = np.array([1.0, -3.0], np.float32)
    short = ipu.embedded_runtime.embedded_runtime_start(path, [], "short_wait", timeout=1000)
    ipu.embedded_runtime.embedded_runtime_call([x], short)  # loads the executable
    started = time.monotonic()
    (y,) = ipu.embedded_runtime.embedded_runtime_call([x], short)
    assert time.monotonic() - started < 1.0
    np.testing.assert_allclose(y.numpy(), (x + 1) * 2)
    long = ipu.embedded_runtime.embedded_runtime_start(path, [], "long_wait", timeout=1_500_000)
    started = time.monotonic()
    (y,) = ipu.embedded_runtime.embedded_runtime_call([x], long)
    assert time.monotonic() - started >= 1.5
    np.testing.assert_allclose(y.numpy(), (x + 1) * 2)
    full = ipu.embedded_runtime.embedded_runtime_start(path, [], "full_run", timeout=30 * 10**6)
    results = {}

    def client(i):
        results[i] = ipu.embedded_runtime.embedded_runtime_call([x + i], full)[0].numpy()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started < 15.0  # not the 30 s timeout
    for i in range(4):
        np.testing.assert_allclose(results[i], (x + i + 1) * 2)


def test_a_tf1_session_runs_the_runtime(ipu_system, tmp_path):
    path, _ = _compile_loop(tmp_path / "model.poplar_exec", iterations=1)
    x = np.ones([2, 4], np.float32)
    with tf.Graph().as_default():
        feed = tf.compat.v1.placeholder(tf.float32, [2, 4])
        context = ipu.embedded_runtime.embedded_runtime_start(str(path.numpy().decode()), [], "tf1")
        outputs = ipu.embedded_runtime.embedded_runtime_call([feed], context)
        with tf.compat.v1.Session() as session:
            y, total = session.run(outputs, {feed: x})
    np.testing.assert_allclose(y, _expected(x)[0], rtol=1e-6)
    assert total == 8.0


def test_wrong_inputs_are_refused_as_the_original_does(ipu_system, tmp_path):
    path, _ = _compile_loop(tmp_path / "model.poplar_exec", iterations=1)
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "checks")
    with pytest.raises(Exception, match="expects 1 inputs, but 2 were provided"):
        ipu.embedded_runtime.embedded_runtime_call([np.ones([2, 4], np.float32)] * 2, context)
    with pytest.raises(Exception, match=r"Mismatched input shape at position 0 \('input_0'\)"):
        ipu.embedded_runtime.embedded_runtime_call([np.ones([3, 4], np.float32)], context)
    with pytest.raises(TypeError, match="Mismatched input dtype at position 0"):
        ipu.embedded_runtime.embedded_runtime_call([np.ones([2, 4], np.int32)], context)
    with pytest.raises(Exception, match="expects 0 inputs, but 1 were provided"):
        ipu.embedded_runtime.embedded_runtime_start(path, [np.ones([1])], "bad_start")
    with pytest.raises(NotImplementedError):
        ipu.embedded_runtime.embedded_runtime_stop(context)
    with pytest.raises(TypeError, match="timeout must be an int"):
        ipu.embedded_runtime.embedded_runtime_start(path, [], "bad_timeout", timeout=0.5)
    with pytest.raises(ValueError, match="timeout must be a non-negative"):
        ipu.embedded_runtime.embedded_runtime_start(path, [], "bad_timeout", timeout=-1)


@pytest.mark.parametrize(
    "damage",
    ["truncated", "corrupted", "foreign", "missing"],
)
def test_a_damaged_executable_file_is_named_in_the_error(ipu_system, tmp_path, damage):
    path = tmp_path / "model.poplar_exec"
    _compile_loop(path, iterations=1)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "corrupted":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    elif damage == "foreign":
        path.write_bytes(b"\x7fELF" + os.urandom(200))
    else:
        path.unlink()
    with pytest.raises(RuntimeError, match=str(path)):
        ipu.embedded_runtime.embedded_runtime_start(str(path), [], f"damaged_{damage}")


def test_eager_inputs_are_baked_in_and_results_are_the_runs_outputs(ipu_system, tmp_path):
    # The original's docstring example, `model(x) = x * x`, compiled eagerly: its input is
    # an eager tensor, so it is baked in as a constant (ops/application_compile_op.py,
    # `constant_indices`); the returned value is an output of the run, not a stream.
    def model(x):
        return x * x

    value = np.array([1.0, 2.0], np.float32)
    path = ipu.application_compile_op.experimental_application_compile_op(
        model, inputs=[value], output_path=str(tmp_path / "square.poplar_exec")
    )
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "square")
    signature = context.signature()
    assert (len(signature.inputs), len(signature.outputs)) == (0, 1)
    assert signature.outputs[0].shape.dimensions == [2]
    assert (len(signature.streamed_inputs), len(signature.streamed_outputs)) == (0, 0)
    assert ipu.embedded_runtime.embedded_runtime_call([], context) == []


def test_a_bare_dequeue_and_enqueue_stream_one_element_per_call(ipu_system, tmp_path):
    dataset = tf.data.Dataset.from_tensor_slices(np.ones(10, np.float32))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    scale = tf.Variable(3.0)

    @tf.function
    def program():
        outfeed.enqueue(infeed._dequeue() * scale)  # noqa: SLF001 - as the original's tests

    path = ipu.application_compile_op.experimental_application_compile_op(
        program, output_path=str(tmp_path / "scale.poplar_exec")
    )
    context = ipu.embedded_runtime.embedded_runtime_start(path, [np.float32(5.0)], "scale")
    signature = context.signature()
    assert [len(signature.inputs), len(signature.streamed_inputs)] == [1, 1]
    assert [len(signature.outputs), len(signature.streamed_outputs)] == [0, 1]
    for x in (2.0, -1.5):
        (y,) = ipu.embedded_runtime.embedded_runtime_call([np.float32(x)], context)
        assert y.numpy() == np.float32(x * 5.0)  # the start-up value of the variable


def test_a_loop_carrying_values_gives_them_as_outputs(ipu_system, tmp_path):
    # The original's test_compile_infeed_and_outfeed: loops.repeat(10, body, v, infeed).
    dataset = tf.data.Dataset.from_tensor_slices(np.ones(10, np.float32))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(total, x):
        total = total + x
        return total, outfeed.enqueue(total)

    def program(total):
        return ipu.loops.repeat(4, body, total, infeed)

    path = ipu.application_compile_op.experimental_application_compile_op(
        program, inputs=[0.0], output_path=str(tmp_path / "sum.poplar_exec")
    )
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "running_sum", timeout=10**6)
    signature = context.signature()
    assert [len(signature.inputs), len(signature.streamed_inputs)] == [0, 1]
    assert [len(signature.outputs), len(signature.streamed_outputs)] == [1, 1]
    xs = [1.0, 2.0, 3.0, 4.0]
    results = [None] * 4

    def call(i):
        results[i] = ipu.embedded_runtime.embedded_runtime_call([np.float32(xs[i])], context)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
        thread.join(0.05)  # the calls arrive in order, and one run takes all four
    for thread in threads:
        thread.join()
    # Each call gets the running sum after its own element (the loop carries the total).
    assert sorted(float(r[0].numpy()) for r in results) == [1.0, 3.0, 6.0, 10.0]


def _calls_in_order(context, elements):
    """Calls from a thread each, started in order; their results, in that order."""
    results = [None] * len(elements)

    def call(i):
        results[i] = ipu.embedded_runtime.embedded_runtime_call(elements[i], context)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(elements))]
    for thread in threads:
        thread.start()
        thread.join(0.05)
    for thread in threads:
        thread.join()
    return results


def test_a_range_loop_over_an_iterator_streams_its_elements(ipu_system, tmp_path):
    # As the original's test_compile_op_with_defunc_infeed_iterator_outfeed: `next()` in an
    # autograph range loop is the executable's streamed input; the iterator is not read.
    features = np.arange(12, dtype=np.float32).reshape(6, 2)
    labels = np.arange(6, dtype=np.float32)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with ipu.ipu_strategy.IPUStrategy().scope():
        iterator = iter(tf.data.Dataset.from_tensor_slices((features, labels)))

    @tf.function
    def program():
        total = tf.constant(0.0)
        for _ in tf.range(3):
            x, y = next(iterator)
            total += tf.reduce_sum(x) * y
            outfeed.enqueue({"weighted": total, "x": x})

    path = ipu.application_compile_op.experimental_application_compile_op(
        program, output_path=str(tmp_path / "iterator.poplar_exec")
    )
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "iterator", timeout=10**6)
    signature = context.signature()
    assert [s.shape.dimensions for s in signature.streamed_inputs] == [[2], []]
    assert len(signature.streamed_outputs) == 2
    # Calls give a step's element each; the running total restarts with every run of 3.
    results = _calls_in_order(context, [[features[i], labels[i]] for i in range(3)])
    want = np.cumsum(features[:3].sum(axis=1) * labels[:3])
    got = sorted(float(r[0].numpy()) for r in results)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert {tuple(r[1].numpy()) for r in results} == {tuple(f) for f in features[:3]}
    np.testing.assert_array_equal(_read_next(iterator)[0].numpy(), features[0])  # not read


def test_a_top_level_next_of_an_iterator_is_a_streamed_input(ipu_system, tmp_path):
    # The original's IPU iterator reads its infeed (`next()` is the infeed's `_dequeue()`,
    # ipu_infeed_queue.py): outside any loop too, it is one streamed element per call.
    features = np.arange(8, dtype=np.float32).reshape(4, 2)
    labels = np.array([1.0, -1.0, 2.0, 0.5], np.float32)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    scale = tf.Variable([3.0, -2.0])
    with ipu.ipu_strategy.IPUStrategy().scope():
        iterator = iter(tf.data.Dataset.from_tensor_slices((features, labels)))

    @tf.function
    def program():
        x, y = next(iterator)
        outfeed.enqueue(tf.reduce_sum(x * scale) * y)

    path = ipu.application_compile_op.experimental_application_compile_op(
        program, output_path=str(tmp_path / "next.poplar_exec"), freeze_variables=True
    )
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "top_level_next")
    signature = context.signature()
    assert [s.shape.dimensions for s in signature.streamed_inputs] == [[2], []]
    assert [len(signature.inputs), len(signature.streamed_outputs)] == [0, 1]
    for i in range(len(labels)):
        (got,) = ipu.embedded_runtime.embedded_runtime_call([features[i], labels[i]], context)
        np.testing.assert_allclose(got.numpy(), (features[i] @ [3.0, -2.0]) * labels[i])
    np.testing.assert_array_equal(_read_next(iterator)[0].numpy(), features[0])  # not read


def _iterator_program(reads_per_step):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with ipu.ipu_strategy.IPUStrategy().scope():
        iterator = iter(tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)))

    @tf.function
    def program():
        for _ in tf.range(2):
            outfeed.enqueue(tf.add_n([next(iterator) for _ in range(reads_per_step)]))

    return program


def test_several_reads_of_an_iterator_per_step_stream_its_elements(ipu_system, tmp_path):
    # The original's next() is a dequeue of the iterator's infeed: each read streams an
    # element of the same streamed input, so a 2-step loop reading twice a step takes 4
    # elements a run and gives 2 outfeed elements, to the calls in order (its queue of
    # result processors, application_runtime.cc).
    path = ipu.application_compile_op.experimental_application_compile_op(
        _iterator_program(reads_per_step=2), output_path=str(tmp_path / "twice.poplar_exec")
    )
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "twice", timeout=10**6)
    signature = context.signature()
    assert [len(signature.streamed_inputs), len(signature.streamed_outputs)] == [1, 1]
    assert signature.streamed_inputs[0].shape.dimensions == []
    elements = [1.0, 2.0, 10.0, 20.0]
    results = {}

    def call(i):
        results[i] = ipu.embedded_runtime.embedded_runtime_call([np.float32(elements[i])], context)

    # Four calls, in order; the last two wait for a later run's outfeed, as on the original.
    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(4)]
    for thread in threads:
        thread.start()
        thread.join(0.05)
    for thread in threads[:2]:
        thread.join(60)
    assert [float(results[i][0].numpy()) for i in (0, 1)] == [3.0, 30.0]
    assert 2 not in results and 3 not in results


def test_next_inside_a_device_loop_without_an_infeed_streams_the_iterator(ipu_system, tmp_path):
    # loops.repeat without infeed_queue: the body's next() is still the iterator's infeed
    # dequeue on the original (ipu_infeed_queue.py), so a streamed input of the executable.
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with ipu.ipu_strategy.IPUStrategy().scope():
        iterator = iter(tf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.float32)))

    def body(total):
        total = total + next(iterator)
        outfeed.enqueue(total * 2.0)
        return total

    @tf.function
    def program():
        ipu.loops.repeat(3, body, [tf.constant(100.0)])

    path = ipu.application_compile_op.experimental_application_compile_op(
        program, output_path=str(tmp_path / "repeat_next.poplar_exec")
    )
    context = ipu.embedded_runtime.embedded_runtime_start(path, [], "repeat_next", timeout=10**6)
    signature = context.signature()
    assert [s.shape.dimensions for s in signature.streamed_inputs] == [[]]
    assert len(signature.streamed_outputs) == 1
    results = _calls_in_order(context, [[np.float32(i + 1)] for i in range(3)])
    # The loop carries its running total through the run's three steps.
    assert [float(results[i][0].numpy()) for i in range(3)] == [202.0, 206.0, 212.0]
    assert float(_read_next(iterator).numpy()) == 0.0  # compiling read nothing


def test_without_output_path_a_temporary_file_is_written(ipu_system):
    path, _ = _compile_loop_default_path()
    try:
        assert os.path.basename(path).startswith("application_compile")
        assert path.endswith(".poplar_exec") and os.path.getsize(path) > 0
    finally:
        os.remove(path)


def test_a_failed_compile_leaves_no_temporary_file(ipu_system, tmp_path, monkeypatch):
    """Without output_path the op makes a temporary file; when the compile fails (a float64
    program the IPU cannot hold) that empty file must not stay behind."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Detected unsupported operations"):
        ipu.application_compile_op.experimental_application_compile_op(
            lambda x: x * 2.0, inputs=[np.ones([3], np.float64)]
        )
    assert list(tmp_path.glob("*.poplar_exec")) == []


def _compile_loop_default_path():
    def model(x):
        return x + 1.0

    path = ipu.application_compile_op.experimental_application_compile_op(
        model, inputs=[np.zeros([2], np.float32)]
    )
    return path.numpy().decode(), None


@pytest.mark.parametrize("freeze_variables", [False, True])
def test_a_pipeline_with_a_closure_variable(ipu_system, tmp_path, freeze_variables):
    dataset = tf.data.Dataset.from_tensor_slices((np.ones((10, 5), np.float32),))
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(1, drop_remainder=True))
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    v = tf.Variable([[2.0, 3.0, 4.0, 5.0, 6.0]], name="eagervar")

    def stage1(c, x):
        return c + x + v

    def stage2(x):
        return x + x

    @tf.function
    def defunc():
        ipu.pipelining_ops.pipeline(
            computational_stages=[stage1, stage2],
            gradient_accumulation_count=4,
            infeed_queue=infeed_queue,
            inputs=[42.0],
            outfeed_queue=outfeed_queue,
            device_mapping=[0, 0],
        )

    path = str(tmp_path / f"pipeline_{freeze_variables}.poplar_exec")
    ipu.application_compile_op.experimental_application_compile_op(
        defunc, inputs=[], output_path=path, freeze_variables=freeze_variables
    )
    start_inputs = [] if freeze_variables else [v.numpy()]
    x = np.full([1, 5], 0.5, np.float32)
    (y,), context = ipu.embedded_runtime.embedded_runtime_start_and_call(
        path, start_inputs, [x], f"closure_{freeze_variables}"
    )
    signature = context.signature()
    # A closure variable is baked in as a constant, or becomes a start-up input.
    assert len(signature.inputs) == (0 if freeze_variables else 1)
    assert len(signature.streamed_inputs) == 1 and len(signature.streamed_outputs) == 1
    np.testing.assert_allclose(y.numpy(), 2 * (42.0 + x + v.numpy()))


def _linear_pipeline_reference(xs, ys, w1, w2, count, lr):
    """Losses of a two-stage linear model trained with SGD on the gradients summed over
    `count` mini-batches (the pipeline's default reduction), in numpy."""
    losses = []
    for start in range(0, len(xs), count):
        g1, g2 = np.zeros_like(w1), np.zeros_like(w2)
        for x, y in zip(xs[start : start + count], ys[start : start + count], strict=True):
            hidden = x @ w1
            error = hidden @ w2 - y
            losses.append(np.mean(error**2))
            d = 2.0 * error / error.size
            g2 += hidden.T @ d
            g1 += x.T @ (d @ w2.T)
        w1, w2 = w1 - lr * g1, w2 - lr * g2
    return np.array(losses), w1, w2


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_a_training_pipeline_trains_run_after_run(ipu_system, tmp_path):
    # A pipeline with an optimizer_function: its gradient accumulators are the program's
    # state, kept by the runtime (not start-up inputs): the signature lists the weights.
    count, lr = 4, 0.1
    rng = np.random.RandomState(0)
    xs = rng.rand(8, 2, 4).astype(np.float32)
    ys = rng.rand(8, 2, 1).astype(np.float32)
    w1_start = rng.rand(4, 3).astype(np.float32) / 2
    w2_start = rng.rand(3, 1).astype(np.float32) / 2
    dataset = tf.data.Dataset.from_tensor_slices((xs, ys))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    w1 = tf.Variable(np.zeros((4, 3), np.float32), name="w1")
    w2 = tf.Variable(np.zeros((3, 1), np.float32), name="w2")

    def stage1(x, y):
        return tf.matmul(x, w1), y

    def stage2(hidden, y):
        return tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - y))

    def optimizer_function(loss):
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(lr)
        return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

    def program():
        return ipu.pipelining_ops.pipeline(
            [stage1, stage2],
            gradient_accumulation_count=count,
            infeed_queue=infeed,
            outfeed_queue=outfeed,
            optimizer_function=optimizer_function,
            device_mapping=[0, 1],
        )

    path = ipu.application_compile_op.experimental_application_compile_op(
        program, output_path=str(tmp_path / "train.poplar_exec"), freeze_variables=False
    )
    context = ipu.embedded_runtime.embedded_runtime_start(
        path, [w1_start, w2_start], "pipeline_training", timeout=10**6
    )
    signature = context.signature()
    assert [s.name for s in signature.inputs] == ["XLA_Args/w1", "XLA_Args/w2"]
    assert [len(signature.streamed_inputs), len(signature.streamed_outputs)] == [2, 1]
    losses = [None] * len(xs)

    def call(i):
        (losses[i],) = ipu.embedded_runtime.embedded_runtime_call([xs[i], ys[i]], context)

    for run in range(2):  # two runs of `count` mini-batches: one weight update each
        threads = [threading.Thread(target=call, args=(i,)) for i in range(run * 4, run * 4 + 4)]
        for thread in threads:
            thread.start()
            thread.join(0.05)
        for thread in threads:
            thread.join()
    want, _, _ = _linear_pipeline_reference(xs, ys, w1_start, w2_start, count, lr)
    got = [float(loss.numpy()) for loss in losses]
    # Each call gets its own element's loss; a run's weights are those of the run before.
    np.testing.assert_allclose(got, want, rtol=1e-5)
    stale, _, _ = _linear_pipeline_reference(xs, ys, w1_start, w2_start, 8, lr)
    assert not np.allclose(got[4:], stale[4:], rtol=1e-4)  # the first run's update counted


def _tf1_training_pipeline(xs, ys, scope):
    """A TF1 program's training pipeline (two stages of tf.compat.v1.get_variable weights)."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices((xs, ys)))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage1(x, y):
        with tf.compat.v1.variable_scope(scope + "1", use_resource=True):
            w = tf.compat.v1.get_variable("w", initializer=np.full((4, 3), 0.3, np.float32))
        return tf.matmul(x, w), y

    def stage2(hidden, y):
        with tf.compat.v1.variable_scope(scope + "2", use_resource=True):
            w = tf.compat.v1.get_variable("w", initializer=np.full((3, 1), 0.2, np.float32))
        return tf.reduce_mean(tf.square(tf.matmul(hidden, w) - y))

    def optimizer_function(loss):
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

    def program():
        return ipu.pipelining_ops.pipeline(
            [stage1, stage2],
            gradient_accumulation_count=4,
            infeed_queue=infeed,
            outfeed_queue=outfeed,
            optimizer_function=optimizer_function,
            device_mapping=[0, 1],
        )

    return program, infeed, outfeed


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_a_tf1_training_pipeline_trains_as_when_run_directly(ipu_system, tmp_path):
    rng = np.random.RandomState(1)
    xs = rng.rand(8, 2, 4).astype(np.float32)
    ys = rng.rand(8, 2, 1).astype(np.float32)
    with tf.Graph().as_default():
        program, infeed, outfeed = _tf1_training_pipeline(xs, ys, "direct")
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            run = ipu.ipu_compiler.compile(program)
        dequeue = outfeed.dequeue()
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(), infeed.initializer])
            direct = np.array([], np.float32)
            for _ in range(2):
                session.run(run)
                direct = np.append(direct, session.run(dequeue))
    with tf.Graph().as_default():
        program, _, _ = _tf1_training_pipeline(xs, ys, "compiled")
        path = ipu.application_compile_op.experimental_application_compile_op(
            program, output_path=str(tmp_path / "tf1_train.poplar_exec")
        )
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(path)
    start = [np.full((4, 3), 0.3, np.float32), np.full((3, 1), 0.2, np.float32)]
    context = ipu.embedded_runtime.embedded_runtime_start(
        str(tmp_path / "tf1_train.poplar_exec"), start, "tf1_training", timeout=10**6
    )
    losses = [None] * len(xs)

    def call(i):
        (losses[i],) = ipu.embedded_runtime.embedded_runtime_call([xs[i], ys[i]], context)

    for run_index in range(2):  # two runs of 4 mini-batches: one weight update each
        threads = [
            threading.Thread(target=call, args=(i,))
            for i in range(4 * run_index, 4 * run_index + 4)
        ]
        for thread in threads:
            thread.start()
            thread.join(0.05)
        for thread in threads:
            thread.join()
    np.testing.assert_allclose([float(v.numpy()) for v in losses], direct, rtol=1e-5)
    assert not np.allclose(direct[4:], _linear_pipeline_reference(xs, ys, *start, 8, 0.1)[0][4:])


def test_a_missing_directory_is_named(ipu_system, tmp_path):
    path = tmp_path / "nonexistent" / "file.poplar_exec"
    with pytest.raises(OSError, match="Failed to open file for writing"):
        ipu.application_compile_op.experimental_application_compile_op(
            lambda x: x * x, inputs=[np.zeros([2], np.float32)], output_path=str(path)
        )
    assert not path.parent.exists()


def test_programs_the_ipu_cannot_hold_are_refused_as_the_original_does(ipu_system, tmp_path):
    """float64 (the IPU has none) and a bare scalar elementwise graph (no Poplar engine to
    serialize) are the original's refusals; a scalar program with a side effect (it
    updates a variable) is a real program and compiles."""
    compile_op = ipu.application_compile_op.experimental_application_compile_op
    with pytest.raises(tf.errors.InvalidArgumentError, match="Detected unsupported operations"):
        compile_op(lambda x: x * 2.0, [np.ones([3], np.float64)], str(tmp_path / "f64"))
    with pytest.raises(tf.errors.FailedPreconditionError, match="scalar elementwise graph"):
        compile_op(lambda x: x * 2.0 + 1.0, [np.float32(3.0)], str(tmp_path / "scalar"))
    assert not os.path.exists(tmp_path / "scalar")  # nothing written

    counter = tf.Variable(1.0)

    def count(x):
        return counter.assign_add(x)

    path = compile_op(count, [np.float32(3.0)], str(tmp_path / "counter"), freeze_variables=False)
    signature = executable_file.read(path.numpy().decode()).signature
    # The variable is a start-up input, and an output as it is written.
    assert [s.name for s in signature.inputs] == ["XLA_Args/Variable"]
    assert [s.name for s in signature.outputs] == ["result_0", "XLA_Retvals/Variable"]


def test_a_program_writing_frozen_variables_is_refused_with_their_names(ipu_system, tmp_path):
    # freeze_variables=True makes constants of the variables; the original prunes their
    # handles from the ops writing them (resource_handle_pruner.cc), so such a program
    # cannot be compiled. The error names the variable and the way out.
    w = tf.Variable(2.0, name="trained_w")

    def train(x):
        with tf.GradientTape() as tape:
            loss = (w * x - 1.0) ** 2
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\['trained_w'\].*freeze_variables"):
        ipu.application_compile_op.experimental_application_compile_op(
            train, [np.float32(1.0)], str(tmp_path / "frozen"), freeze_variables=True
        )
    assert not os.path.exists(tmp_path / "frozen")
