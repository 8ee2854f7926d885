"""graphcore/popart tests/integration/fp16_test.py: float16 adds of inputs, of a weight, and
of transposed tensors (Cpu)."""

import numpy as np
import pytest
from popart_session_helpers import infer

import popart

HALF = popart.TensorInfo("FLOAT16", [2])


@pytest.mark.follows("test_add_fp16")
def test_add_fp16():
    builder = popart.Builder()
    i1, i2 = builder.addInputTensor(HALF), builder.addInputTensor(HALF)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    inputs = {i1: np.array([1.0, 3.0], np.float16), i2: np.array([7.0, 8.0], np.float16)}
    out = infer(builder.getModelProto(), [o], inputs)[o]
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, np.array([8.0, 11.0], np.float16))


@pytest.mark.follows("test_add_variable_fp16")
def test_add_variable_fp16():
    builder = popart.Builder()
    i1 = builder.addInputTensor(HALF)
    o = builder.aiOnnx.add([i1, builder.addInitializedInputTensor(np.array([2, 4], np.float16))])
    builder.addOutputTensor(o)
    out = infer(builder.getModelProto(), [o], {i1: np.array([1.0, 3.0], np.float16)})[o]
    np.testing.assert_array_equal(out, np.array([3.0, 7.0], np.float16))


@pytest.mark.follows("test_fp16transpose")
def test_fp16transpose():
    c0_data = np.random.randn(5, 6).astype(np.float16)
    d0_data = np.random.randn(1, 6).astype(np.float16)
    builder = popart.Builder()
    c0 = builder.aiOnnx.constant(c0_data, "c0")
    d0 = builder.addInputTensor(popart.TensorInfo(d0_data))
    c0_t = builder.aiOnnx.transpose([c0], [], "c0_transpose")
    d0_t = builder.aiOnnx.transpose([d0], [], "d0_transpose")
    o = builder.aiOnnx.add([d0_t, c0_t], "add")
    builder.addOutputTensor(o)
    out = infer(builder.getModelProto(), [o], {d0: d0_data})[o]
    np.testing.assert_allclose(out, c0_data.T + d0_data.T, atol=1e-4, rtol=1e-2)
