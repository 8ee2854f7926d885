"""FP8 conversions and operators (`ipu.ops.f8_ops`), as the original's f8_test.py uses them,
against ml_dtypes' float8_e4m3fnuz / float8_e5m2fnuz (the IPU's F143 / F152) and numpy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ops import f8_ops

Format = f8_ops.Format
QuarterTensor = f8_ops.QuarterTensor
convert_from_f8, convert_to_f8 = f8_ops.convert_from_f8, f8_ops.convert_to_f8
create_metadata = f8_ops.create_metadata

REFERENCE_TYPES = {Format.F143: ml_dtypes.float8_e4m3fnuz, Format.F152: ml_dtypes.float8_e5m2fnuz}


def _samples(seed=0):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=4000) * 10.0 ** rng.uniform(-5, 5, size=4000)
    return values.astype(np.float16).astype(np.float32)


@pytest.mark.parametrize("fmt", list(Format))
@pytest.mark.parametrize("scale", [-1, 0, 1])
@pytest.mark.parametrize("dtype", [tf.float16, tf.float32, tf.int32])
def test_round_trip_of_exact_values(ipu_system, fmt, scale, dtype):
    # f8_test.py `testConvertF8`: these values survive the round trip in every case.
    values = [-1, 1, 2, -4] if dtype == tf.int32 else [-0.75, 1, 2, -4]

    @tf.function(experimental_compile=True)
    def program(values, meta):
        return convert_from_f8(convert_to_f8(values, meta), dtype=dtype)

    strategy = ipu.ipu_strategy.IPUStrategy()
    result = strategy.run(
        program,
        args=(tf.constant(values, dtype), tf.constant(create_metadata(fmt, scale), tf.uint8)),
    )
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, values)


@pytest.mark.parametrize("fmt", list(Format))
@pytest.mark.parametrize("scale", [-3, 0, 2])
def test_rounding_matches_ml_dtypes(fmt, scale):
    values = _samples()
    quarter = convert_to_f8(tf.constant(values), create_metadata(fmt, scale))
    assert isinstance(quarter, QuarterTensor)
    reference = (values * 2.0**-scale).astype(REFERENCE_TYPES[fmt])
    in_range = np.isfinite(reference.astype(np.float32))
    np.testing.assert_array_equal(
        quarter.data.numpy()[in_range], reference.view(np.uint8)[in_range]
    )
    np.testing.assert_array_equal(
        convert_from_f8(quarter, dtype=tf.float32).numpy()[in_range],
        (reference.astype(np.float32) * 2.0**scale).astype(np.float16)[in_range],
    )


@pytest.mark.parametrize("fmt", list(Format))
def test_every_bit_pattern_reads_as_ml_dtypes_does(fmt):
    bits = np.arange(256, dtype=np.uint8)
    ours = convert_from_f8((tf.constant(bits), create_metadata(fmt)), dtype=tf.float32).numpy()
    reference = bits.view(REFERENCE_TYPES[fmt]).astype(np.float32)
    np.testing.assert_array_equal(ours, reference)  # NaN (0x80) included


def test_overflow_saturates_unless_nan_on_overflow():
    big = tf.constant([1000.0, -1000.0])
    saturated = convert_from_f8(convert_to_f8(big, create_metadata(Format.F143)), tf.float32)
    np.testing.assert_array_equal(saturated, [240.0, -240.0])
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.floating_point_behaviour.nanoo = True
    config.configure_ipu_system()
    try:
        overflowed = convert_from_f8(convert_to_f8(big, create_metadata(Format.F143)), tf.float32)
    finally:
        ipu.config.reset_ipu_configuration()
    assert np.isnan(overflowed.numpy()).all()


def test_quarter_tensor_holds_uint8_data():
    quarter = QuarterTensor(np.array([1, 2], np.uint8), create_metadata(Format.F152, 1))
    data, metadata = quarter
    assert quarter.shape == (2,) and quarter.dtype == tf.uint8 and len(quarter) == 2
    assert int(metadata) == 1
    quarter.assign([np.array([3, 4], np.uint8), np.array(create_metadata(Format.F143), np.uint8)])
    np.testing.assert_array_equal(quarter.numpy()[0], [3, 4])
    with pytest.raises(TypeError, match="only uint8 are supported"):
        QuarterTensor(tf.constant([1.0]), 0)


def _quarter(x):
    return convert_to_f8(x, create_metadata(Format.F143, 1))


@pytest.mark.parametrize("grouped", [False, True])
def test_matmul_of_quarter_tensors(ipu_system, grouped):
    rng = np.random.default_rng(1)
    lhs = rng.normal(size=(2, 3, 4)).astype(np.float16)
    rhs = rng.normal(size=(2, 4, 5)).astype(np.float16)
    if not grouped:
        lhs, rhs = lhs[0], rhs[0]

    @tf.function(experimental_compile=True)
    def program(lhs, rhs):
        return f8_ops.f8_matmul(_quarter(lhs), _quarter(rhs))

    result = ipu.ipu_strategy.IPUStrategy().run(program, args=(lhs, rhs))
    assert result.dtype == tf.float16 and result.shape == np.matmul(lhs, rhs).shape
    as_f8 = lambda a: (a * 0.5).astype(ml_dtypes.float8_e4m3fnuz).astype(np.float32) * 2  # noqa: E731
    expected = np.matmul(as_f8(lhs), as_f8(rhs)).astype(np.float16)
    np.testing.assert_allclose(result, expected, rtol=1e-3)


def test_convolutions_of_exact_values_match_float16():
    # f8_test.py: ones and identity images with 2s and identity kernels are exact in FP8.
    x1 = np.ones((1, 5, 1), np.float16)
    k1 = np.full((3, 1, 1), 2, np.float16)
    np.testing.assert_array_equal(
        f8_ops.f8_conv_1d(_quarter(x1), _quarter(k1), strides=(1, 2, 1), padding="SAME"),
        tf.nn.conv1d(x1, k1, stride=(1, 2, 1), padding="SAME"),
    )
    x2 = np.eye(5, dtype=np.float16)[None, :, :, None]
    k2 = np.eye(3, dtype=np.float16)[:, :, None, None]
    np.testing.assert_array_equal(
        f8_ops.f8_conv_2d(_quarter(x2), _quarter(k2), strides=(1, 2, 2, 1), padding="SAME"),
        tf.nn.conv2d(x2, k2, strides=(1, 2, 2, 1), padding="SAME"),
    )
    x3 = np.repeat(np.eye(4, dtype=np.float16)[None], 6, axis=0)[None, ..., None]
    k3 = np.repeat(np.eye(2, dtype=np.float16)[None, :, :, None, None], 2, axis=0)
    np.testing.assert_array_equal(
        f8_ops.f8_conv_3d(_quarter(x3), _quarter(k3), strides=(1, 3, 3, 3, 1), padding="SAME"),
        tf.nn.conv3d(x3, k3, strides=(1, 3, 3, 3, 1), padding="SAME"),
    )


def test_the_module_is_reachable_under_both_paths():
    from tensorflow.python.ipu import f8_ops as top_level

    assert ipu.ops.f8_ops is f8_ops and top_level is f8_ops


def test_f8_conversion_layers_in_a_keras_model():
    from ipu_tensorflow_addons.keras.layers import ConvertFromF8, ConvertToF8

    values = _samples(1)[:64].reshape(8, 8)
    data = tf.keras.Input((8,))
    metadata = tf.keras.Input((), dtype=tf.uint8, batch_size=1)
    packed = ConvertToF8()(data, tf.reshape(metadata, []))
    model = tf.keras.Model([data, metadata], ConvertFromF8(dtype=tf.float32)(packed))
    result = model([values, np.array([create_metadata(Format.F152, 2)], np.uint8)])
    reference = (values * 2.0**-2).astype(ml_dtypes.float8_e5m2fnuz).astype(np.float32) * 4
    in_range = np.isfinite(reference)
    assert result.dtype == tf.float32
    np.testing.assert_array_equal(result.numpy()[in_range], reference[in_range])
