"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/f8_test.py`.

`ipu.ops.f8_ops` in TF1 programs: values converted to f8 (both formats, scales -1, 0 and 1)
and back, on the CPU and compiled for the IPU, are unchanged; an f8 matrix product (plain
and batched) and f8 convolutions in 1, 2 and 3 dimensions give the float16 results. (The
original's matrix product class reuses the name `testConvertF8`.)
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu import test_utils as tu
from tensorflow.python.ipu.ops.f8_ops import (
    Format,
    QuarterTensor,
    convert_from_f8,
    convert_to_f8,
    create_metadata,
    f8_conv_1d,
    f8_conv_2d,
    f8_conv_3d,
    f8_matmul,
)

v1 = tf.compat.v1


@pytest.fixture
def configured(tf1_graph):
    config = ipu.config.IPUConfig()
    config.ipu_model.compile_ipu_code = False
    config.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


_CONVERT_CASES = [
    pytest.param(
        f, scale, dtype, on_ipu, id=f"{'IPU' if on_ipu else 'CPU'}_{f}_{scale}_{dtype.name}"
    )
    for f in Format
    for scale in (-1, 0, 1)
    for dtype in (tf.float16, tf.float32, tf.int32)
    for on_ipu in (False, True)
]


@pytest.mark.follows("testConvertF8")
@pytest.mark.parametrize(("f8_format", "f8_scale", "dtype", "on_ipu"), _CONVERT_CASES)
def test_convert_f8(configured, f8_format, f8_scale, dtype, on_ipu):
    input_values = [-0.75, 1, 2, -4] if dtype != tf.int32 else [-1, 1, 2, -4]
    with tf.device("cpu"):
        a = v1.placeholder(dtype, [4])
        m = v1.placeholder(tf.uint8, [])

    def my_net(values, meta):
        return convert_from_f8(convert_to_f8(values, meta), dtype=dtype)

    if on_ipu:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            res = ipu.ipu_compiler.compile(my_net, [a, m])
    else:
        with tf.device("/device:CPU:0"):
            res = [my_net(a, m)]
    with tu.ipu_session() as sess:
        (result,) = sess.run(res, {a: input_values, m: create_metadata(f8_format, f8_scale)})
    np.testing.assert_array_equal(result, input_values)


def _to_quarter(x):
    return convert_to_f8(x, create_metadata(Format.F143, 1))


def _as_int32(out):
    if isinstance(out, QuarterTensor):
        return convert_from_f8((out.data, out.metadata), dtype=tf.int32)
    return tf.cast(out, tf.int32)


_PAULI_X = np.array([[0, 1], [1, 0]], np.uint8)
_PAULI_Z = np.array([[2, 0], [0, 2]], np.uint8)
_ANSWER = _PAULI_X @ _PAULI_Z


@pytest.mark.follows("testConvertF8")
@pytest.mark.parametrize(
    ("lhs_in", "rhs_in", "answer"),
    [
        pytest.param(_PAULI_Z, _PAULI_X, _ANSWER, id="mat_mul_uint8"),
        pytest.param(
            np.broadcast_to(_PAULI_Z, [2, 2, 2]), np.broadcast_to(_PAULI_X, [2, 2, 2]),
            np.broadcast_to(_ANSWER, [2, 2, 2]), id="grouped_mat_mul",
        ),
    ],
)  # fmt: skip
def test_f8_matmul(configured, lhs_in, rhs_in, answer):
    def model(lhs_, rhs_):
        out = f8_matmul(_to_quarter(lhs_), _to_quarter(rhs_))
        return _as_int32(out), rhs_

    with tf.device("cpu"):
        aa = v1.placeholder(tf.uint8, lhs_in.shape)
        mm = v1.placeholder(tf.uint8, rhs_in.shape)
    with tu.ipu_session() as sess:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            res = ipu.ipu_compiler.compile(model, [aa, mm])
        result, _ = sess.run(res, {aa: lhs_in, mm: rhs_in})
    np.testing.assert_array_equal(result, answer)


def _compare_conv(conv_f16, conv_f8, conv_input, conv_kernel, strides):
    def model(x, k):
        out_f16 = conv_f16(x, k, strides, padding="SAME")
        out_f8 = conv_f8(_to_quarter(x), _to_quarter(k), strides=strides, padding="SAME")
        return out_f16, _as_int32(out_f8)

    with tf.device("cpu"):
        x = v1.placeholder(conv_input.dtype, conv_input.shape)
        k = v1.placeholder(conv_kernel.dtype, conv_kernel.shape)
    with tu.ipu_session() as sess:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            res = ipu.ipu_compiler.compile(model, [x, k])
        res_f16, res_f8 = sess.run(res, {x: conv_input, k: conv_kernel})
    np.testing.assert_array_equal(res_f16, res_f8)


@pytest.mark.follows("testConv1D")
def test_conv_1d(configured):
    # The original's only case (its case list returns after the first).
    conv_input = np.ones([1, 5, 1], dtype=np.float16)
    conv_kernel = np.ones([3, 1, 1], dtype=np.float16) * 2
    _compare_conv(tf.nn.conv1d, f8_conv_1d, conv_input, conv_kernel, (1, 2, 1))


@pytest.mark.follows("testConv2D")
def test_conv_2d(configured):
    conv_input = np.eye(5, dtype=np.float16)[None, :, :, None]
    conv_kernel = np.eye(3, dtype=np.float16)[:, :, None, None]
    _compare_conv(tf.nn.conv2d, f8_conv_2d, conv_input, conv_kernel, (1, 2, 2, 1))


@pytest.mark.follows("testConv3D")
def test_conv_3d(configured):
    conv_input = np.repeat(np.eye(5, dtype=np.float16)[None], 6, axis=0)[None, ..., None]
    conv_kernel = np.repeat(np.eye(3, dtype=np.float16)[None, :, :, None, None], 3, axis=0)
    _compare_conv(tf.nn.conv3d, f8_conv_3d, conv_input, conv_kernel, (1, 2, 2, 2, 1))
