"""`BufferDataset`: unchanged elements, reading the input in groups, argument errors."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.data import BufferDataset


def _elements(dataset: tf.data.Dataset) -> list:
    return list(dataset.as_numpy_iterator())


@pytest.mark.parametrize("buffer_size", [1, 3, 10, 25])
def test_elements_are_those_of_the_input(buffer_size):
    source = tf.data.Dataset.range(10).map(lambda n: {"x": tf.fill([2], n), "y": n * 2})
    buffered = BufferDataset(source, buffer_size)
    assert isinstance(buffered, tf.data.Dataset)
    assert buffered.element_spec == source.element_spec
    assert buffered.buffer_size == buffer_size
    # Complete groups only (the original's dataset_ops_test.py).
    got, expected = _elements(buffered), _elements(source)[: 10 // buffer_size * buffer_size]
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a["x"], b["x"])
        assert a["y"] == b["y"]


def test_elements_of_varying_shape_pass_unchanged():
    source = tf.data.Dataset.range(1, 6).map(lambda n: tf.range(n))
    got = _elements(BufferDataset(source, 2))
    assert [list(a) for a in got] == [list(range(n)) for n in range(1, 5)]


def test_an_incomplete_last_group_is_not_given():
    source = tf.data.Dataset.range(7).map(lambda n: (n, tf.fill([2], n)))
    got = _elements(BufferDataset(source, 3))
    assert [int(a) for a, _ in got] == list(range(6))


def test_reads_the_input_a_group_at_a_time():
    pulled = []

    def counting_source():
        for n in range(12):
            pulled.append(n)
            yield n

    source = tf.data.Dataset.from_generator(
        counting_source, output_signature=tf.TensorSpec([], tf.int64)
    )
    iterator = iter(BufferDataset(source, 4))
    assert int(next(iterator)) == 0
    # A full group was available before the first element came out.
    assert len(pulled) >= 4


def test_works_in_a_graph(tf1_graph):
    buffered = BufferDataset(tf.data.Dataset.range(5), 2)
    next_element = tf.compat.v1.data.make_one_shot_iterator(buffered).get_next()
    with tf.compat.v1.Session() as session:
        assert [session.run(next_element) for _ in range(4)] == [0, 1, 2, 3]
        with pytest.raises(tf.errors.OutOfRangeError):
            session.run(next_element)


@pytest.mark.parametrize(
    ("buffer_size", "error", "match"),
    [
        # As the original: the size is converted to an int64 tensor first, then the kernel
        # checks it (more cases in test_data_original_rules.py).
        (
            tf.constant(0, tf.int64),
            tf.errors.InvalidArgumentError,
            r"^Buffer size must be greater than zero\.$",
        ),
        (
            np.int64(-1),
            tf.errors.InvalidArgumentError,
            r"^Buffer size must be greater than zero\.$",
        ),
        (2.5, TypeError, "int64"),
        (tf.constant(2.0), ValueError, "requested dtype int64 for Tensor with dtype float32"),
        (None, ValueError, r"^Attempt to convert a value \(None\)"),
    ],
)
def test_bad_buffer_size(buffer_size, error, match):
    with pytest.raises(error, match=match):
        BufferDataset(tf.data.Dataset.range(3), buffer_size)


def test_input_must_be_a_dataset():
    # As the original: the size is converted before the input's variant tensor is read
    # (an AttributeError for what is not a dataset: test_data_original_rules.py).
    with pytest.raises(TypeError, match="int64"):
        BufferDataset([1, 2, 3], "4")
    with pytest.raises(
        AttributeError, match="EagerTensor' object has no attribute '_variant_tensor'"
    ):
        BufferDataset(tf.constant([1, 2, 3]), 2)
