"""`BufferDataset`: a dataset that reads its input in groups of `buffer_size` elements."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops

from openipu._src.data.host_pipeline import check_positive_count


class BufferDataset(dataset_ops.UnaryUnchangedStructureDataset):
    """A Dataset which makes sure there is a multiple of `buffer_size` elements available.

    The elements are those of `input_dataset`, unchanged and in order; the input is read
    `buffer_size` elements at a time, so a consumer that takes elements in groups of
    `buffer_size` never waits for the input in the middle of a group. An incomplete last
    group is not given (the original's dataset_ops_test.py: 3 elements with a buffer of 2
    give 2).
    """

    def __init__(self, input_dataset: tf.data.Dataset, buffer_size: int) -> None:
        if not isinstance(input_dataset, tf.data.Dataset):
            raise TypeError(
                f"BufferDataset needs a tf.data.Dataset as input_dataset, got "
                f"{type(input_dataset).__name__}"
            )
        self._input_dataset = input_dataset
        self._buffer_size = check_positive_count(buffer_size, "BufferDataset: buffer_size")
        buffered = _read_in_groups(input_dataset, self._buffer_size)
        super().__init__(input_dataset, buffered._variant_tensor)

    @property
    def buffer_size(self) -> int:
        return self._buffer_size


def _read_in_groups(dataset: tf.data.Dataset, group_size: int) -> tf.data.Dataset:
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
