"""BufferDataset's errors as the original's (audit F26) and eager compile outside a scope
(F18): user programs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.data.ops.dataset_ops import BufferDataset


def test_an_input_that_is_not_a_dataset_is_an_attribute_error():
    with pytest.raises(AttributeError, match="_variant_tensor"):
        BufferDataset([1, 2, 3], 2)


@pytest.mark.parametrize("buffer_size", [0, -2])
def test_a_buffer_size_below_one_is_the_kernels_invalid_argument(buffer_size):
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"^Buffer size must be greater than zero\.$"
    ):
        BufferDataset(tf.data.Dataset.range(4), buffer_size)


@pytest.mark.parametrize("buffer_size", [2.0, "4"])
def test_a_buffer_size_an_int64_tensor_cannot_take_is_a_type_error(buffer_size):
    with pytest.raises(TypeError, match="int64"):
        BufferDataset(tf.data.Dataset.range(4), buffer_size)


@pytest.mark.parametrize(
    "buffer_size", [True, np.int32(2), np.float64(2.0), tf.constant(2, tf.int64)]
)
def test_what_converts_to_an_int64_is_a_buffer_size(buffer_size):
    got = list(BufferDataset(tf.data.Dataset.range(5), buffer_size).as_numpy_iterator())
    expected = 5 // int(buffer_size) * int(buffer_size)
    assert got == list(range(expected))


def test_a_graph_s_buffer_size_tensor_is_checked_when_the_dataset_runs(tf1_graph):
    size = tf.compat.v1.placeholder(tf.int64, [])
    iterator = tf.compat.v1.data.make_initializable_iterator(
        BufferDataset(tf.data.Dataset.range(5), size)
    )
    element = iterator.get_next()
    with tf.compat.v1.Session() as session:
        session.run(iterator.initializer, {size: 2})
        assert [session.run(element) for _ in range(4)] == [0, 1, 2, 3]
        with pytest.raises(tf.errors.InvalidArgumentError, match="Buffer size must be greater"):
            session.run(iterator.initializer, {size: 0})


def test_eager_compile_outside_an_ipu_scope_runs_on_the_host():
    # As the original's tf.function (xla.compile): no placement error, no IPU needed.
    result = ipu.ipu_compiler.compile(lambda x: x * 3.0, [tf.constant([1.0, 2.0])])
    assert len(result) == 1
    np.testing.assert_allclose(result[0].numpy(), [3.0, 6.0])
