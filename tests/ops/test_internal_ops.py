"""internal_ops: print_tensor prints to standard error; remaps are copies."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import internal_ops


def test_print_tensor_prints_to_stderr_eagerly(capfd):
    internal_ops.print_tensor(tf.constant([1, 2, 3]), name="my_tensor")
    assert "my_tensor: [1 2 3]" in capfd.readouterr().err


def test_print_tensor_in_a_function_prints_when_run(capfd):
    @tf.function
    def model(v):
        print_op = internal_ops.print_tensor(v)
        with tf.control_dependencies([print_op]):
            return v + 1

    np.testing.assert_array_equal(model(tf.constant([[5, 6]])), [[6, 7]])
    assert "[[5 6]]" in capfd.readouterr().err


def test_print_tensor_returns_a_runnable_op_in_a_graph(tf1_graph, capfd):
    placeholder = tf.compat.v1.placeholder(tf.float32, [2])
    print_op = internal_ops.print_tensor(placeholder)
    with tf.compat.v1.Session() as session:
        session.run(print_op, {placeholder: [0.5, 1.5]})
    assert "[0.5 1.5]" in capfd.readouterr().err


def test_remap_and_remap_deduce_copy_their_input():
    x = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4))
    for op in (internal_ops.remap, internal_ops.remap_deduce):
        np.testing.assert_array_equal(op(x), x)
        np.testing.assert_array_equal(tf.function(op, jit_compile=True)(x), x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(op(x) * 2.0)
        np.testing.assert_array_equal(tape.gradient(y, x), np.full((3, 4), 2.0))


def _loop_outputs(ipu_system, body, iterations=6):
    """Runs `body(i)` in a device loop of `iterations`; what it enqueued, per iteration."""
    from tensorflow.python import ipu

    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def loop_body(i):
        return i + 1.0, outfeed.enqueue(body(i))

    strategy = ipu.ipu_strategy.IPUStrategy()
    strategy.run(
        tf.function(lambda: ipu.loops.repeat(iterations, loop_body, [0.0]), jit_compile=True)
    )
    return outfeed.dequeue().numpy()


def test_fifo_returns_the_value_of_depth_iterations_ago(ipu_system):
    delayed = _loop_outputs(ipu_system, lambda i: internal_ops.fifo(tf.fill([2], i), depth=2))
    # Iterations 0 and 1 have nothing queued yet (zeros); then i - 2.
    np.testing.assert_array_equal(delayed[:, 0], [0, 0, 0, 1, 2, 3])
    for depth in (0, -1):  # below 1 there is no queue: the value itself (the original's rule)
        same = _loop_outputs(ipu_system, lambda i, d=depth: internal_ops.fifo(i, depth=d))
        np.testing.assert_array_equal(same, np.arange(6))
    numpy_depth = _loop_outputs(ipu_system, lambda i: internal_ops.fifo(i, depth=np.int64(1)))
    np.testing.assert_array_equal(numpy_depth, [0, 0, 1, 2, 3, 4])


def test_fifo_takes_a_float_depth_as_the_original_s_int_attribute_does(ipu_system):
    # The original hands depth to an int attribute (int(2.5) == 2); below 1 there is no queue.
    delayed = _loop_outputs(ipu_system, lambda i: internal_ops.fifo(i, depth=2.5))
    np.testing.assert_array_equal(delayed, [0, 0, 0, 1, 2, 3])
    same = _loop_outputs(ipu_system, lambda i: internal_ops.fifo(i, depth=0.5))
    np.testing.assert_array_equal(same, np.arange(6))


def test_fifo_checks_its_arguments():
    with pytest.raises(TypeError, match="depth must be an int, got 'two'"):
        internal_ops.fifo(tf.ones([2]), "two")
    with pytest.raises(TypeError, match="offload must be a bool"):
        internal_ops.fifo(tf.ones([2]), 1, offload="yes")


@pytest.mark.parametrize("ipu_system", [2], indirect=True)
def test_iteration_counter_counts_the_accumulation_iterations(ipu_system):
    from tensorflow.python import ipu

    dataset = tf.data.Dataset.from_tensor_slices(np.zeros([8, 1], np.float32)).batch(
        1, drop_remainder=True
    )
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def stage1(x):
        return x, internal_ops.get_current_iteration_counter()

    def stage2(x, counter):
        return counter

    net = tf.function(
        lambda: ipu.pipelining_ops.pipeline(
            [stage1, stage2], 4, repeat_count=2, infeed_queue=infeed, outfeed_queue=outfeed
        ),
        jit_compile=True,
    )
    ipu.ipu_strategy.IPUStrategy().run(net)
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [0, 1, 2, 3, 0, 1, 2, 3])


def test_iteration_counter_outside_a_loop_is_the_programs_own_zero(ipu_system):
    """Outside any loop of an IPU program the counter is the program's own, 0 (the original's
    execution-counter scopes); outside an IPU program the op cannot run."""
    from tensorflow.python import ipu

    counter = tf.Variable(0.0)

    def step():
        return counter.assign_add(1.0), internal_ops.get_current_iteration_counter()

    strategy = ipu.ipu_strategy.IPUStrategy()
    for _ in range(2):
        _, value = strategy.run(tf.function(step, jit_compile=True))
        assert int(value) == 0
    with pytest.raises(tf.errors.NotFoundError, match="runs only in an IPU program"):
        internal_ops.get_current_iteration_counter()
