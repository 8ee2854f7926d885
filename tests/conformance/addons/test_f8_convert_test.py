"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/f8_convert_test.py`.

`ConvertToF8` and `ConvertFromF8` give what the `f8_ops` functions give (the data and
metadata bytes; the values as float16 or another dtype). Independently of the ops, the
sample values are exact in FP8 (F143, scale 0), so converting there and back returns
them.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ipu.ops.f8_ops import Format, convert_from_f8, convert_to_f8, create_metadata

from ipu_tensorflow_addons.keras.layers import ConvertFromF8, ConvertToF8

DATA = np.array([[1.0, 2.0], [3.0, -1.0], [-3.0, -5.0]])
METADATA = create_metadata(Format.F143, 0)


@pytest.mark.follows("test_to_f8")
def test_to_f8():
    output = ConvertToF8()(DATA, METADATA)
    expected = convert_to_f8(DATA, METADATA)
    np.testing.assert_array_equal(output[0], expected.data)
    np.testing.assert_array_equal(output[1], expected.metadata)
    assert output[0].dtype == tf.uint8


@pytest.mark.follows("test_from_f8")
def test_from_f8():
    packed = convert_to_f8(DATA, METADATA)
    output = ConvertFromF8()([packed.data, packed.metadata])
    np.testing.assert_array_equal(output, convert_from_f8(packed))
    assert output.dtype == tf.float16
    np.testing.assert_array_equal(output, DATA.astype(np.float16))


@pytest.mark.follows("test_from_f8_with_dtype")
def test_from_f8_with_dtype():
    packed = convert_to_f8(DATA, METADATA)
    output = ConvertFromF8(dtype=tf.float32)([packed.data, packed.metadata])
    np.testing.assert_array_equal(output, convert_from_f8(packed, dtype=tf.float32))
    assert output.dtype == tf.float32
    np.testing.assert_array_equal(output, DATA.astype(np.float32))
