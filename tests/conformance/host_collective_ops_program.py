"""The host collective scenarios of `test_host_collective_ops_test.py`, run by poprun."""

import numpy as np
import tensorflow as tf
from poprun_scenarios import main, scenario
from tensorflow.python.framework import errors
from tensorflow.python.ipu.distributed import host_collective_ops

import popdist

TYPES = (tf.float16, tf.float32, tf.int8, tf.int16, tf.int32, tf.int64)
SUM = tf.distribute.ReduceOp.SUM
rank = popdist.getInstanceIndex()
size = popdist.getNumInstances()


def _equal(actual, expected, dtype=None):
    actual = np.asarray(actual)
    if dtype is not None:
        assert actual.dtype == dtype.as_numpy_dtype, (actual.dtype, dtype)
    np.testing.assert_array_equal(actual, expected)


@scenario
def test_allgather():
    for dtype in TYPES:
        x = tf.constant(rank, dtype=dtype)
        _equal(host_collective_ops.allgather(x), np.arange(size), dtype)


@scenario
def test_allreduce_sum():
    for dtype in TYPES:
        x = tf.constant(rank, dtype=dtype)
        _equal(host_collective_ops.allreduce(x, SUM), sum(range(size)), dtype)


@scenario
def test_allreduce_mean():
    for dtype in TYPES:
        x = tf.constant(rank, dtype=dtype)
        expected = dtype.as_numpy_dtype(sum(range(size)) / size)  # 0.5, or 0 for integers
        result = host_collective_ops.allreduce(x, tf.distribute.ReduceOp.MEAN)
        _equal(result, expected, dtype)


@scenario
def test_broadcast():
    for dtype in TYPES:
        x = tf.constant(42 if rank == 0 else 0, dtype=dtype)
        _equal(host_collective_ops.broadcast(x), 42, dtype)


def _in_different_orders(collective, x, y):
    """Even instances run the collective on x then y, odd ones on y then x."""

    @tf.function
    def x_first(x, y):
        res_x = collective(x)
        return res_x, collective(y)

    @tf.function
    def y_first(x, y):
        res_y = collective(y)
        return collective(x), res_y

    return (x_first if rank % 2 == 0 else y_first)(x, y)


@scenario
def test_all_allgather_different_order():
    x = tf.constant(rank, tf.float32)
    y = tf.constant([rank, rank], tf.int32)
    res_x, res_y = _in_different_orders(host_collective_ops.allgather, x, y)
    _equal(res_x, np.arange(size, dtype=np.float32))
    _equal(res_y, [[i, i] for i in range(size)])


@scenario
def test_allreduce_different_order():
    x = tf.constant(rank, tf.float32)
    y = tf.constant([rank, rank], tf.int32)
    res_x, res_y = _in_different_orders(lambda t: host_collective_ops.allreduce(t, SUM), x, y)
    expected = sum(range(size))
    _equal(res_x, expected)
    _equal(res_y, [expected, expected])


@scenario
def test_broadcast_different_order():
    initial = 42 if rank == 0 else 0
    x = tf.constant(initial, tf.float32)
    y = tf.constant([initial, initial], tf.int32)
    res_x, res_y = _in_different_orders(host_collective_ops.broadcast, x, y)
    _equal(res_x, 42)
    _equal(res_y, [42, 42])


def _refused_as_layouts_differ(collective, x):
    try:
        collective(x)
    except errors.UnknownError as error:
        assert "Tensor layouts did not match on all instances" in error.message, error.message
        return
    raise AssertionError(f"{collective} of differing tensors was not refused")


def _dtype_differs():
    return tf.constant(rank, tf.float32 if rank % 2 == 0 else tf.int32)


def _shape_differs():
    return tf.constant(1 if rank % 2 == 0 else [1, 1], tf.int32)


def _allreduce_sum(x):
    return host_collective_ops.allreduce(x, SUM)


@scenario
def test_allgather_different_dtype():
    _refused_as_layouts_differ(host_collective_ops.allgather, _dtype_differs())


@scenario
def test_allgather_different_shape():
    _refused_as_layouts_differ(host_collective_ops.allgather, _shape_differs())


@scenario
def test_allreduce_different_dtype():
    _refused_as_layouts_differ(_allreduce_sum, _dtype_differs())


@scenario
def test_allreduce_different_shape():
    _refused_as_layouts_differ(_allreduce_sum, _shape_differs())


@scenario
def test_broadcast_different_dtype():
    _refused_as_layouts_differ(host_collective_ops.broadcast, _dtype_differs())


@scenario
def test_broadcast_different_shape():
    _refused_as_layouts_differ(host_collective_ops.broadcast, _shape_differs())


if __name__ == "__main__":
    main()
