"""`IPUOutfeedQueue` (spec 21.5): modes, the documented dequeue shapes, E8-E10."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

from openipu._src.engine.host_queue import HostQueue
from openipu._src.engine.outfeed_queue import EngineOutfeedQueue


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


def _spec_example(strategy, outfeed, structure: str, iterations: int):
    """The spec's examples: body enqueues `output` (and its sum) `iterations` times."""

    def body(value):
        output = value + 1
        total = tf.reduce_sum(output)
        element = {
            "tensor": output,
            "tuple": (output, total),
            "dict": {"x": output, "y": total},
        }[structure]
        return output, outfeed.enqueue(element)

    net = tf.function(lambda v: ipu.loops.repeat(iterations, body, (v)), jit_compile=True)
    return strategy.run(net, args=(tf.ones([4, 4]),))


@pytest.mark.parametrize("mode", [None, ipu.ipu_outfeed_queue.IPUOutfeedMode.ALL])
def test_all_mode_returns_every_element(strategy, mode):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=mode)
    result = _spec_example(strategy, outfeed, "tensor", 20)
    outfed = outfeed.dequeue().numpy()
    assert outfed.shape == (20, 4, 4)
    np.testing.assert_array_equal(outfed[:, 0, 0], np.arange(2, 22))
    np.testing.assert_array_equal(result.numpy(), np.full([4, 4], 21.0))


def test_last_mode_returns_the_last_element(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)
    _spec_example(strategy, outfeed, "tensor", 20)
    outfed = outfeed.dequeue().numpy()
    assert outfed.shape == (4, 4)
    np.testing.assert_array_equal(outfed, np.full([4, 4], 21.0))


def test_tuple_shapes(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    _spec_example(strategy, outfeed, "tuple", 20)
    output, total = outfeed.dequeue()
    # The spec writes the sum's shape as [20, 1]; a reduce_sum is a scalar, so [20].
    assert output.shape == (20, 4, 4) and total.shape == (20,)
    np.testing.assert_array_equal(total.numpy(), 16 * np.arange(2, 22))


@pytest.mark.parametrize(
    "mode, shapes", [("ALL", {"x": (40, 4, 4), "y": (40,)}), ("LAST", {"x": (4, 4), "y": ()})]
)
def test_dict_shapes(strategy, mode, shapes):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode[mode])
    _spec_example(strategy, outfeed, "dict", 40)
    outfed = outfeed.dequeue()
    assert {k: tuple(v.shape) for k, v in outfed.items()} == shapes


def test_dequeue_drains_and_later_enqueues_accumulate(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    _spec_example(strategy, outfeed, "tensor", 3)
    assert outfeed.dequeue().shape[0] == 3
    assert outfeed.dequeue().shape[0] == 0
    _spec_example(strategy, outfeed, "tensor", 2)
    _spec_example(strategy, outfeed, "tensor", 2)
    assert outfeed.dequeue().shape[0] == 4


def test_dequeue_before_any_enqueue_raises_in_a_graph(tf1_graph):
    with pytest.raises(
        ValueError, match="Trying to dequeue an outfeed which has not been enqueued"
    ):
        ipu.ipu_outfeed_queue.IPUOutfeedQueue().dequeue()


def test_dequeue_before_any_enqueue_is_empty_eagerly(strategy):
    """A thread polling the outfeed may start before training enqueues anything."""
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    assert outfeed.dequeue() == []
    assert list(outfeed) == []
    _spec_example(strategy, outfeed, "tensor", 3)
    assert outfeed.dequeue().shape[0] == 3


def test_enqueued_property(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    assert not outfeed.enqueued
    _spec_example(strategy, outfeed, "tensor", 1)
    assert outfeed.enqueued


def test_last_mode_with_nothing_new_raises(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)
    _spec_example(strategy, outfeed, "tensor", 2)
    outfeed.dequeue()
    # The original's error (kernels/datastream/feeds.cc).
    with pytest.raises(tf.errors.FailedPreconditionError, match="Trying to get the last value"):
        outfeed.dequeue()


def test_iterating_yields_each_enqueued_element(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    _spec_example(strategy, outfeed, "dict", 5)
    elements = list(outfeed)
    assert len(elements) == 5
    assert [float(e["y"]) for e in elements] == [16.0 * k for k in range(2, 7)]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        # The original's messages (ipu_outfeed_queue.py).
        ({"outfeed_mode": "ALL"}, "Expected `outfeed_mode` value to be of"),
        ({"buffer_depth": 0}, "Outfeed buffer depth cannot be less than 1"),
        ({"device_ordinal": -1}, "Device ordinal must be >= 0"),
        ({"device_ordinal": "0"}, "Device ordinal must be an integer"),
    ],
)
def test_constructor_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ipu.ipu_outfeed_queue.IPUOutfeedQueue(**kwargs)


def test_enqueue_structure_validation(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    # Dictionaries with keys other than strings are accepted, as by the original
    # (infeed_outfeed_test.py enqueues {101: ..., 2020: ...}); other objects fail with
    # TensorFlow's own conversion error, as the original's convert_n_to_tensor does.
    with pytest.raises((TypeError, ValueError)) as stock:
        tf.convert_to_tensor(object())
    with pytest.raises(type(stock.value)):
        outfeed.enqueue(object())


def test_buffer_depth_takes_any_number_above_zero_as_the_original(strategy):
    # The original checks only `buffer_depth <= 0` (ipu_outfeed_queue.py); its op's int
    # attribute takes a float. A str fails Python's own comparison with an int.
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(buffer_depth=2.0)
    _spec_example(strategy, outfeed, "tensor", 3)
    assert outfeed.dequeue().shape[0] == 3
    with pytest.raises(TypeError) as stock:
        _ = "3" <= 0
    with pytest.raises(type(stock.value)):
        ipu.ipu_outfeed_queue.IPUOutfeedQueue(buffer_depth="3")


@pytest.mark.parametrize("depth, message", [(256, "< 256, got 256"), (0.5, "0 < prefetch_depth")])
def test_enqueue_needs_a_prefetch_depth_the_kernel_takes(strategy, depth, message):
    # The original's enqueue kernel (kernels/datastream/feeds.cc) needs 0 < depth < 256 of
    # its int attribute (0.5 becomes 0).
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(buffer_depth=depth)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        strategy.run(tf.function(lambda: outfeed.enqueue(tf.ones([2]))))


def test_enqueue_of_other_shapes_into_a_used_queue_fails_as_the_executor(strategy):
    # poplar_executor.cc (RegisterOutfeeds) refuses an outfeed id already holding other
    # shapes with FailedPrecondition; the first program's elements stay dequeueable.
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    strategy.run(tf.function(lambda: outfeed.enqueue(tf.ones([2]))))
    with pytest.raises(tf.errors.FailedPreconditionError, match="already exists but with a"):
        strategy.run(tf.function(lambda: outfeed.enqueue(tf.ones([3]))))
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), np.ones([1, 2]))


def test_enqueue_twice_in_one_graph_raises(ipu_system, tf1_graph):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    outfeed.enqueue(tf.constant(1.0))
    with pytest.raises(ValueError, match="An outfeed can only be enqueued once."):
        outfeed.enqueue(tf.constant(2.0))


def test_enqueue_outside_a_loop_goes_straight_to_the_host(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    @tf.function
    def step(x):
        outfeed.enqueue(x * 2)
        return x

    strategy.run(step, args=(tf.constant([1.0, 2.0]),))
    strategy.run(step, args=(tf.constant([3.0, 4.0]),))
    np.testing.assert_array_equal(outfeed.dequeue().numpy(), [[2.0, 4.0], [6.0, 8.0]])


def test_synthetic_data(strategy, monkeypatch):
    all_mode = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    last_mode = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)
    _spec_example(strategy, all_mode, "tuple", 3)
    _spec_example(strategy, last_mode, "tensor", 3)
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_synthetic_data")
    output, total = all_mode.dequeue()
    assert output.shape == (0, 4, 4) and total.shape == (0,)
    # The original's dequeue kernel fails with FailedPrecondition (kernels/datastream/feeds.cc).
    with pytest.raises(tf.errors.FailedPreconditionError, match="synthethic data"):
        last_mode.dequeue()


def test_replica_dimension_follows_the_spec_table():
    """[K, R, *S] for ALL and [R, *S] for LAST with R replicas (filled directly)."""
    store = HostQueue([tf.TensorSpec([4, 4], tf.float32)], replicas=2, name="replicated")
    for replica in range(2):
        for k in range(3):
            store.enqueue([tf.fill([4, 4], float(10 * k + replica))], replica)
    for mode, shape in [("ALL", (3, 2, 4, 4)), ("LAST", (2, 4, 4))]:
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode[mode])
        outfeed._structure = tf.TensorSpec([4, 4], tf.float32)  # noqa: SLF001
        outfeed._store = store  # noqa: SLF001
        if mode == "LAST":
            for replica in range(2):
                store.enqueue([tf.fill([4, 4], float(100 + replica))], replica)
        values = outfeed.dequeue().numpy()
        assert values.shape == shape
        if mode == "ALL":
            np.testing.assert_array_equal(values[:, :, 0, 0], [[0, 1], [10, 11], [20, 21]])
        else:
            np.testing.assert_array_equal(values[:, 0, 0], [100, 101])


def test_deleter_allows_a_new_structure(strategy):
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    _spec_example(strategy, outfeed, "tensor", 2)
    outfeed.deleter  # noqa: B018
    assert not outfeed.enqueued
    _spec_example(strategy, outfeed, "dict", 2)
    assert set(outfeed.dequeue()) == {"x", "y"}


_EMPTY_DIMENSION = "Detected an input tensor to an outfeed queue with a dimension of size 0"


def test_programs_cannot_enqueue_empty_tensors(strategy):
    # kernels/datastream/feeds.cc: the original's compiler refuses the enqueue, so the
    # program fails when it runs (is compiled), in a loop or not.
    in_loop = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    outside = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        return x + 1.0, in_loop.enqueue({"empty": tf.zeros([0, 3], tf.int32), "x": x})

    with pytest.raises(tf.errors.InvalidArgumentError, match=_EMPTY_DIMENSION):
        strategy.run(tf.function(lambda: ipu.loops.repeat(3, body, [0.0]), jit_compile=True))
    with pytest.raises(tf.errors.InvalidArgumentError, match=_EMPTY_DIMENSION):
        strategy.run(tf.function(lambda: outside.enqueue(tf.zeros([2, 0])), jit_compile=True))


def test_engine_outfeeds_carry_empty_tensors_with_their_shapes(strategy):
    """The engine's own outfeed (a PopART model's outputs may be empty) carries them, though
    TensorFlow's host queues crash on elements of zero size."""
    in_loop = EngineOutfeedQueue()

    def body(x):
        return x + 1.0, in_loop.enqueue({"empty": tf.zeros([0, 3], tf.int32), "x": x})

    strategy.run(tf.function(lambda: ipu.loops.repeat(3, body, [0.0]), jit_compile=True))
    looped = in_loop.dequeue()
    assert looped["empty"].shape == (3, 0, 3) and looped["empty"].dtype == tf.int32
    np.testing.assert_array_equal(looped["x"].numpy(), [0.0, 1.0, 2.0])


def test_enqueued_is_false_in_a_new_trace(strategy):
    # ipu_outfeed_queue.py `enqueued`: it asks whether the current graph (or one built inside
    # it) enqueued, so a program traced again enqueues again.
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    seen = []

    @tf.function(jit_compile=True)
    def program(x, step):  # a Python `step`: each value is a new trace
        def body(value):
            seen.append(outfeed.enqueued)
            if not outfeed.enqueued:
                return value + step, outfeed.enqueue(value)
            return value + step

        return ipu.loops.repeat(1, body, [x])

    strategy.run(program, args=(tf.zeros([2]), 1.0))
    strategy.run(program, args=(tf.zeros([2]), 2.0))
    assert seen[0] is False and seen[-1] is False
    assert len(outfeed.dequeue()) == 2
    assert outfeed.enqueued


def test_an_element_of_unknown_shape_is_enqueued_but_cannot_be_dequeued(strategy):
    # The original's enqueue kernel takes the shapes XLA compiled, so the program runs; its
    # dequeue kernel reads the recorded static shapes as full shapes and fails
    # (kernels/datastream/feeds.cc, TensorFlow's TensorShape::IsValidShape).
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def step(x):
        def body(x):
            doubled = x * 2
            with tf.control_dependencies([outfeed.enqueue({"doubled": doubled})]):
                return tf.reduce_sum(doubled)

        return strategy.run(body, args=(x,))

    total = step(tf.ones([3, 4]))
    assert float(total) == 24.0  # the program ran, and computed what it enqueued
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"^Shape \[\?,4\] is not fully defined$"
    ):
        outfeed.dequeue()


def test_a_tf1_program_enqueuing_an_unknown_shape_runs_and_its_dequeue_fails(ipu_system):
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        x = v1.placeholder(np.float32, [None, 4])
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(x):
            return outfeed.enqueue(x + 1)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            run = ipu.ipu_compiler.compile(body, [x])
        dequeued = outfeed.dequeue()
        assert dequeued.shape.as_list() == [None, None, 4]  # the dequeue op's static shape
        with v1.Session() as session:
            session.run(run, {x: np.zeros((2, 4), np.float32)})
            with pytest.raises(tf.errors.InvalidArgumentError, match=r"Shape \[\?,4\] is not"):
                session.run(dequeued)


def test_the_engine_outfeed_still_needs_known_shapes():
    queue = EngineOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.ALL)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        with pytest.raises(ValueError, match="not fully defined"):
            queue.enqueue(x)


def test_a_later_program_enqueuing_known_shapes_can_dequeue_them(ipu_system):
    v1 = tf.compat.v1
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    with tf.Graph().as_default():
        x = v1.placeholder(np.float32, [None, 4])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            ipu.ipu_compiler.compile(lambda x: outfeed.enqueue(x), [x])
    with tf.Graph().as_default():
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            run = ipu.ipu_compiler.compile(lambda: outfeed.enqueue(tf.ones([2, 4])), [])
        dequeued = outfeed.dequeue()
        with v1.Session() as session:
            session.run(run)
            np.testing.assert_array_equal(session.run(dequeued), np.ones((1, 2, 4)))
