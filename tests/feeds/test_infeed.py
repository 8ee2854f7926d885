"""`IPUInfeedQueue` (spec 21.4) and its error rules E4-E7."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu


def test_needs_a_dataset():
    with pytest.raises(TypeError, match="needs a tf.data.Dataset, got list"):
        ipu.ipu_infeed_queue.IPUInfeedQueue([1, 2, 3])


def test_shapes_must_be_fully_defined():
    dataset = tf.data.Dataset.from_tensor_slices(np.ones([10, 3], np.float32)).batch(4)
    with pytest.raises(ValueError, match=r"not fully defined.*drop_remainder=True"):
        ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)


def test_nested_component_with_unknown_shape_is_named():
    dataset = tf.data.Dataset.from_tensor_slices(
        {"a": np.ones([10, 3], np.float32), "b": np.ones([10, 2], np.float32)}
    ).batch(4)
    with pytest.raises(ValueError, match="element component 'a'"):
        ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)


@pytest.mark.parametrize("depth", [-1, 256, 1.5, True])
def test_prefetch_depth_validation(depth):
    dataset = tf.data.Dataset.from_tensor_slices(np.ones([4, 3], np.float32))
    with pytest.raises(ValueError, match="prefetch_depth"):
        ipu.ipu_infeed_queue.IPUInfeedQueue(dataset, prefetch_depth=depth)


def test_prefetch_depth_is_kept():
    dataset = tf.data.Dataset.from_tensor_slices(np.ones([4, 3], np.float32))
    assert ipu.ipu_infeed_queue.IPUInfeedQueue(dataset, prefetch_depth=7).prefetch_depth == 7


def test_a_zero_prefetch_depth_is_the_default(ipu_system):
    # The original takes `prefetch_depth or 3`.
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.range(10, output_type=tf.int32), prefetch_depth=0
    )
    net = tf.function(
        lambda: ipu.loops.repeat(4, lambda t, x: t + x, [tf.constant(0, tf.int32)], queue)
    )
    assert int(ipu.ipu_strategy.IPUStrategy().run(net)) == 0 + 1 + 2 + 3


def test_initializer_second_access_raises_in_a_graph(tf1_graph):
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.range(4, output_type=tf.int32))
    queue.initializer  # noqa: B018 - the property access is the test
    with pytest.raises(ValueError, match="can only be accessed once"):
        queue.initializer  # noqa: B018


def test_initializer_may_be_accessed_again_eagerly():
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.range(4, output_type=tf.int32))
    queue.initializer  # noqa: B018
    queue.initializer  # noqa: B018 - no error, as in the original


@pytest.mark.parametrize("feed", ["infeed", "outfeed"])
def test_device_ordinal_defaults_to_the_strategy_device(strategy_on, feed):
    strategy = strategy_on(1)
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [1, 1]
    config.configure_ipu_system()
    on_second = ipu.ipu_strategy.IPUStrategy("/device:IPU:1")

    def make():
        if feed == "infeed":
            return ipu.ipu_infeed_queue.IPUInfeedQueue(
                tf.data.Dataset.range(4, output_type=tf.int32)
            )
        return ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    assert make().device_ordinal == 0
    with on_second.scope():
        assert make().device_ordinal == 1
    with strategy.scope():
        assert make().device_ordinal == 0


def test_get_next_is_obsolete():
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.range(4, output_type=tf.int32))
    # The original's message (ipu_infeed_queue.py).
    with pytest.raises(ValueError, match=r"`get_next\(\)` is now obsolete"):
        queue.get_next()


@pytest.mark.parametrize(
    "element, count",
    [
        ((np.ones([4, 2]), np.ones([4])), 2),
        ({"a": np.ones([4]), "b": np.ones([4]), "c": np.ones([4])}, 3),
        (np.ones([4]), 1),
    ],
)
def test_number_of_tuple_elements(element, count):
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(element))
    assert queue.number_of_tuple_elements == count


def test_nested_structure_reaches_the_body(ipu_system):
    dataset = tf.data.Dataset.from_tensor_slices(
        ({"x": np.arange(8, dtype=np.float32).reshape(4, 2)}, np.arange(4, dtype=np.int32))
    )
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    strategy = ipu.ipu_strategy.IPUStrategy()

    def body(total, features, label):
        return total + tf.reduce_sum(features["x"]) * tf.cast(label, tf.float32)

    @tf.function(jit_compile=True)
    def net():
        return ipu.loops.repeat(4, body, [0.0], queue)

    expected = sum(np.arange(8).reshape(4, 2)[i].sum() * i for i in range(4))
    assert float(strategy.run(net)) == expected


def test_exhausted_dataset_raises_out_of_range(ipu_system):
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(
        tf.data.Dataset.from_tensor_slices(np.ones([3, 2], np.float32))
    )
    strategy = ipu.ipu_strategy.IPUStrategy()

    @tf.function(jit_compile=True)
    def net():
        return ipu.loops.repeat(5, lambda total, x: total + tf.reduce_sum(x), [0.0], queue)

    with pytest.raises(tf.errors.OutOfRangeError):
        strategy.run(net)


def test_tf1_session_needs_the_initializer_and_then_streams(ipu_system, tf1_graph):
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.range(10, output_type=tf.int32))
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(
                4, lambda total, x: total + x, [tf.constant(0, tf.int32)], queue
            )
        )
    with tf.compat.v1.Session(graph=tf1_graph) as session:
        with pytest.raises(tf.errors.FailedPreconditionError):
            session.run(result)
        session.run(queue.initializer)
        assert session.run(result) == [0 + 1 + 2 + 3]
        assert session.run(result) == [4 + 5 + 6 + 7]


def test_deleter_releases_the_iterator(ipu_system):
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.range(10, output_type=tf.int32))
    strategy = ipu.ipu_strategy.IPUStrategy()
    net = tf.function(
        lambda: ipu.loops.repeat(2, lambda t, x: t + x, [tf.constant(0, tf.int32)], queue)
    )
    assert int(strategy.run(net)) == 1
    assert queue.deleter is None  # eager: nothing to run
    assert queue._stream._chunks is None  # noqa: SLF001


def test_private_dequeue_reads_one_element_per_replica(strategy_on):
    # The original's tests read an infeed with `_dequeue()` in a program; each replica
    # reads its own element, in replica order.
    strategy = strategy_on(2)
    with strategy.scope():
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
            tf.data.Dataset.range(10, output_type=tf.int32).map(lambda i: tf.cast(i, tf.float32))
        )

        @tf.function(jit_compile=True)
        def program():
            x = infeed._dequeue()
            return ipu.cross_replica_ops.cross_replica_sum(
                x * tf.cast(1 + ipu.replication_ops.replication_index(), tf.float32)
            )

        assert float(strategy.run(program)) == 0.0 * 1 + 1.0 * 2
        assert float(strategy.run(program)) == 2.0 * 1 + 3.0 * 2


def test_a_tf2_program_reading_elements_with_an_empty_dimension_fails(strategy_on):
    # As the original's dequeue op (kernels/datastream/feeds.cc): an InvalidArgumentError.
    strategy = strategy_on(1)
    dataset = tf.data.Dataset.from_tensors(tf.zeros([2, 0])).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)

    @tf.function
    def program():
        return ipu.loops.repeat(2, lambda total, x: total + tf.reduce_sum(x), [0.0], infeed)

    with strategy.scope():
        with pytest.raises(tf.errors.InvalidArgumentError, match="dimension of size 0"):
            strategy.run(program)
    with pytest.raises(tf.errors.InvalidArgumentError, match="dimension of size 0"):
        infeed.initializer  # noqa: B018 - eagerly, the iterator op fails at once


@pytest.mark.parametrize(("dtype", "type_string"), [(tf.int64, "int64"), (tf.float64, "double")])
def test_feeds_carry_only_the_ipu_stream_types(ipu_system, dtype, type_string):
    # kernels/datastream/feeds.cc: the iterator (eagerly, the initializer) and a program
    # reading the queue refuse other element types with a FailedPreconditionError.
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(4)).map(lambda x: tf.cast(x, dtype))
    queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    # TensorFlow's C++ type names, as the original's message (DataTypeString).
    message = f"Unsupported datatype {type_string} on index 0 of feed operation"
    with pytest.raises(tf.errors.FailedPreconditionError, match=message):
        queue.initializer  # noqa: B018
    net = tf.function(lambda: ipu.loops.repeat(2, lambda t, x: t + x, [tf.zeros([], dtype)], queue))
    with pytest.raises(tf.errors.FailedPreconditionError, match=message):
        ipu.ipu_strategy.IPUStrategy().run(net)
    accepted = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.map(lambda x: tf.cast(x, tf.int32)))
    net = tf.function(lambda: ipu.loops.repeat(2, lambda t, x: t + x, [0], accepted))
    assert int(ipu.ipu_strategy.IPUStrategy().run(net)) == 0 + 1


@pytest.mark.parametrize(("dtype", "type_string"), [(tf.int64, "int64"), (tf.float64, "double")])
def test_outfeeds_carry_only_the_ipu_stream_types(ipu_system, dtype, type_string):
    # kernels/datastream/feeds.cc: the enqueue kernel checks its element's types too, when
    # the program is compiled; the index is the component's in the flat element.
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def body(x):
        outfeed.enqueue({"kept": x, "unsupported": tf.cast(x, dtype)})
        return x + 1.0

    net = tf.function(lambda: ipu.loops.repeat(3, body, [0.0]))
    message = f"^Unsupported datatype {type_string} on index 1 of feed operation"
    with pytest.raises(tf.errors.FailedPreconditionError, match=message):
        ipu.ipu_strategy.IPUStrategy().run(net)

    cast_back = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def cast_body(x):
        cast_back.enqueue(tf.cast(tf.cast(x, dtype), tf.int32))
        return x + 1.0

    ipu.ipu_strategy.IPUStrategy().run(tf.function(lambda: ipu.loops.repeat(3, cast_body, [0.0])))
    np.testing.assert_array_equal(cast_back.dequeue(), [0, 1, 2])
