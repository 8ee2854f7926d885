"""`export_dataset_to_file`, `export_inputs_to_file` and the exported file format."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.utils import (
    export_dataset_to_file,
    export_inputs_to_file,
    read_exported_file,
    read_exported_metadata,
)

NUM = 20
IMAGES = np.arange(NUM * 6, dtype=np.float32).reshape(NUM, 2, 3) / 7
LABELS = np.arange(NUM, dtype=np.int32) * 3 - 5


def _dict_dataset() -> tf.data.Dataset:
    # Keys given out of order: components are numbered in sorted key order.
    return tf.data.Dataset.from_tensor_slices({"b": LABELS, "a": IMAGES})


def test_dict_elements_give_one_file_per_component_in_key_order(tmp_path):
    paths = export_dataset_to_file(_dict_dataset(), tmp_path / "my_dataset.bin", NUM)
    assert paths == [str(tmp_path / "my_dataset.0.bin"), str(tmp_path / "my_dataset.1.bin")]
    np.testing.assert_array_equal(read_exported_file(paths[0]), IMAGES)
    np.testing.assert_array_equal(read_exported_file(paths[1]), LABELS)
    assert read_exported_file(paths[0]).dtype == np.float32
    assert read_exported_metadata(paths[1])["component"] == "b"


def test_num_elements_as_the_original_s_int_attribute_takes_it(tmp_path):
    # The original's extractor op converts num_elements with int(): 2.0 and 2.7 export 2.
    for count in (2.0, 2.7, np.int32(2)):
        (path,) = export_dataset_to_file(tf.data.Dataset.range(5), tmp_path / "n.bin", count)
        np.testing.assert_array_equal(read_exported_file(path), [0, 1])


def test_exports_only_the_first_num_elements(tmp_path):
    dataset = tf.data.Dataset.from_tensor_slices((IMAGES, LABELS)).repeat()
    paths = export_dataset_to_file(dataset, str(tmp_path / "data.bin"), 7)
    np.testing.assert_array_equal(read_exported_file(paths[0]), IMAGES[:7])
    np.testing.assert_array_equal(read_exported_file(paths[1]), LABELS[:7])


def test_nested_elements_give_one_file_per_leaf(tmp_path):
    dataset = tf.data.Dataset.from_tensor_slices(((IMAGES, {"x": LABELS}), LABELS * 2))
    paths = export_dataset_to_file(dataset, tmp_path / "nested.bin", 4, apply_options=False)
    assert len(paths) == 3
    for path, expected in zip(paths, [IMAGES[:4], LABELS[:4], LABELS[:4] * 2], strict=True):
        np.testing.assert_array_equal(read_exported_file(path), expected)


def test_single_tensor_elements_go_to_the_given_file(tmp_path):
    dataset = tf.data.Dataset.from_tensor_slices(IMAGES)
    paths = export_dataset_to_file(dataset, tmp_path / "images.bin", NUM)
    assert paths == [str(tmp_path / "images.bin")]
    np.testing.assert_array_equal(read_exported_file(paths[0]), IMAGES)


def test_file_without_extension_gets_bin_suffixes(tmp_path):
    paths = export_dataset_to_file(_dict_dataset(), tmp_path / "plain", 2)
    assert paths == [str(tmp_path / "plain.0.bin"), str(tmp_path / "plain.1.bin")]


def test_infeed_exports_its_dataset_with_the_feed_name(tmp_path):
    infeed = IPUInfeedQueue(_dict_dataset())
    paths = export_dataset_to_file(infeed, tmp_path / "feed.bin", 5, feed_name="train_feed")
    np.testing.assert_array_equal(read_exported_file(paths[0]), IMAGES[:5])
    assert read_exported_metadata(paths[0])["feed_name"] == "train_feed"


def test_graph_mode_dataset(tf1_graph, tmp_path):
    dataset = tf.data.Dataset.from_tensor_slices((IMAGES, LABELS)).map(lambda x, y: (x * 2, y))
    paths = export_dataset_to_file(dataset, tmp_path / "graph.bin", NUM)
    np.testing.assert_array_equal(read_exported_file(paths[0]), IMAGES * 2)
    np.testing.assert_array_equal(read_exported_file(paths[1]), LABELS)


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16, tf.bool, tf.uint8, tf.int64])
def test_round_trips_other_dtypes(tmp_path, dtype):
    values = tf.cast(tf.reshape(tf.range(12), [4, 3]) % 3, dtype)
    path = export_dataset_to_file(tf.data.Dataset.from_tensor_slices(values), tmp_path / "t", 4)
    read_back = read_exported_file(path[0])
    assert read_back.dtype == dtype.as_numpy_dtype
    np.testing.assert_array_equal(read_back, values.numpy())


def test_file_layout_is_header_then_raw_little_endian_bytes(tmp_path):
    path = export_dataset_to_file(tf.data.Dataset.from_tensor_slices(IMAGES), tmp_path / "x", 3)[0]
    raw = open(path, "rb").read()
    assert raw[:8] == b"OPENIPU\x00"
    (header_length,) = struct.unpack("<I", raw[8:12])
    header = json.loads(raw[12 : 12 + header_length])
    assert header["dtype"] == "float32" and header["shape"] == [3, 2, 3]
    assert header["byte_order"] == "little"
    data_start = 12 + header_length
    assert data_start % 64 == 0
    assert raw[data_start:] == IMAGES[:3].astype("<f4").tobytes()


def test_inputs_from_a_feed_dict_in_a_graph(tf1_graph, tmp_path):
    x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
    y = tf.compat.v1.placeholder(tf.int32, [4], name="y")
    doubled = x * 2
    x_value, y_value = IMAGES[0], [1, 2, 3, 4]
    paths = export_inputs_to_file(
        [x, y, doubled], tmp_path / "inputs.bin", {x: x_value, "y:0": y_value}
    )
    assert len(paths) == 3
    np.testing.assert_array_equal(read_exported_file(paths[0]), x_value)
    np.testing.assert_array_equal(read_exported_file(paths[1]), np.array(y_value, np.int32))
    np.testing.assert_array_equal(read_exported_file(paths[2]), x_value * 2)
    assert read_exported_metadata(paths[0])["component"] == "x:0"


def test_eager_inputs(tmp_path):
    variable = tf.Variable([[1.5, 2.5]])
    paths = export_inputs_to_file([tf.constant([7, 8]), variable], tmp_path / "in.bin", None)
    np.testing.assert_array_equal(read_exported_file(paths[0]), [7, 8])
    np.testing.assert_array_equal(read_exported_file(paths[1]), [[1.5, 2.5]])


@pytest.mark.parametrize(
    ("dataset_or_infeed", "num_elements", "error", "match"),
    [
        # The original asserts the type (utils.py).
        (IMAGES, 1, AssertionError, "tf.data.Dataset or an IPUInfeedQueue"),
        (tf.data.Dataset.range(3), 0, ValueError, "num_elements must be at least 1"),
        (tf.data.Dataset.range(3), "2", TypeError, "num_elements must be an int"),
        (tf.data.Dataset.range(3), 4, ValueError, "has only 3 elements"),
        (tf.data.Dataset.range(3).take(0), 1, ValueError, "no elements"),
        (tf.data.Dataset.from_tensor_slices(["a", "b"]), 2, TypeError, "numeric"),
        (
            tf.data.Dataset.range(1, 4).map(lambda n: tf.range(n)),
            3,
            tf.errors.InvalidArgumentError,
            "same shape",
        ),
        (
            tf.data.Dataset.range(1, 4).map(lambda n: tf.RaggedTensor.from_row_lengths([1], [1])),
            2,
            TypeError,
            "dense",
        ),
    ],
)
def test_export_errors(tmp_path, dataset_or_infeed, num_elements, error, match):
    with pytest.raises(error, match=match):
        export_dataset_to_file(dataset_or_infeed, tmp_path / "bad.bin", num_elements)


def test_feed_name_must_be_a_string(tmp_path):
    with pytest.raises(TypeError, match="feed_name"):
        export_dataset_to_file(tf.data.Dataset.range(3), tmp_path / "f.bin", 1, feed_name=3)


def test_export_inputs_errors(tmp_path):
    with pytest.raises(ValueError, match="inputs is empty"):
        export_inputs_to_file([], tmp_path / "a.bin", {})
    with pytest.raises(TypeError, match="feed_dict must be a dict"):
        export_inputs_to_file([tf.constant(1.0)], tmp_path / "a.bin", [1])


def test_reader_rejects_other_files(tmp_path):
    other = tmp_path / "other.bin"
    np.arange(4, dtype=np.float32).tofile(other)
    with pytest.raises(ValueError, match="not a file written by export_dataset_to_file"):
        read_exported_file(other)
