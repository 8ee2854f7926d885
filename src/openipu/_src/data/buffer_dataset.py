"""`BufferDataset`: a dataset that reads its input in groups of `buffer_size` elements."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops


class BufferDataset(dataset_ops.UnaryUnchangedStructureDataset):
    """A Dataset which makes sure there is a multiple of `buffer_size` elements available.

    The elements are those of `input_dataset`, unchanged and in order; the input is read
    `buffer_size` elements at a time, so a consumer that takes elements in groups of
    `buffer_size` never waits for the input in the middle of a group. An incomplete last
    group is not given (the original's dataset_ops_test.py: 3 elements with a buffer of 2
    give 2).
    """

    def __init__(self, input_dataset: tf.data.Dataset, buffer_size: int | tf.Tensor) -> None:
        # As the original (python/ipu/data/ops/dataset_ops.py:37-44): the size becomes an
        # int64 tensor (floats and strings are convert_to_tensor's TypeError), then the
        # input's variant tensor is read (an AttributeError for what is not a dataset), then
        # the kernel checks the size (kernels/dataset/buffer_dataset_op.cc:273-278).
        self._input_dataset = input_dataset
        size = tf.convert_to_tensor(buffer_size, dtype=tf.int64, name="buffer_size")
        input_dataset._variant_tensor  # noqa: B018 - the original's first use of the input
        if size.shape.rank is not None and size.shape.rank != 0:
            raise tf.errors.InvalidArgumentError(None, None, "buffer_size must be a scalar")
        value = tf.get_static_value(size)
        if value is not None:
            # The kernel's error: eagerly when the dataset is made; in a graph the original
            # has it when the dataset op runs, here when the dataset is built.
            _check_buffer_size(int(value))
            self._buffer_size: int | tf.Tensor = int(value)
        else:  # a graph's tensor: checked when the dataset is made (its iterator's start)
            self._buffer_size = _checked_at_run_time(size)
        buffered = _read_in_groups(input_dataset, self._buffer_size)
        super().__init__(input_dataset, buffered._variant_tensor)

    @property
    def buffer_size(self) -> int | tf.Tensor:
        return self._buffer_size


_SIZE_MESSAGE = "Buffer size must be greater than zero."


def _check_buffer_size(size: int) -> None:
    if size <= 0:
        raise tf.errors.InvalidArgumentError(None, None, _SIZE_MESSAGE)


def _checked_at_run_time(size: tf.Tensor) -> tf.Tensor:
    # InvalidArgumentError as the kernel's; TensorFlow's assertion words surround its text.
    check = tf.debugging.Assert(size > 0, [_SIZE_MESSAGE])
    with tf.control_dependencies([check]):
        return tf.identity(size)


def _read_in_groups(dataset: tf.data.Dataset, group_size: int | tf.Tensor) -> tf.data.Dataset:
    specs = tf.nest.flatten(dataset.element_spec)
    if all(isinstance(s, tf.TensorSpec) and s.shape.is_fully_defined() for s in specs):
        # A batch materialises `group_size` input elements before the first
        # of them is handed on, which is exactly the guarantee.
        return dataset.batch(group_size, drop_remainder=True).unbatch()
    # Elements of varying shape cannot be batched: windows of the same size (complete
    # ones only) read as many elements before handing any on.
    windows = dataset.window(group_size, drop_remainder=True)
    return windows.flat_map(
        lambda *parts: tf.data.Dataset.zip(parts[0] if len(parts) == 1 else parts)
    )
