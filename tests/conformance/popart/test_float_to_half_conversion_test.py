"""graphcore/popart tests/integration/float_to_half_conversion_test.py: GraphTransformer's
convertFloatsToHalfs gives a model that computes in float16 what the float32 one computes
(identity, mul, a constant) (Cpu)."""

import numpy as np
import pytest
from popart_session_helpers import infer

import popart


def _halved(proto):
    transformer = popart.GraphTransformer(proto)
    transformer.convertFloatsToHalfs()
    return transformer.getModelProto()


def _compare(build, inputs):
    builder = popart.Builder()
    ids, o = build(builder)
    builder.addOutputTensor(o)
    proto = builder.getModelProto()
    single = infer(proto, [o], {i: v.astype(np.float32) for i, v in zip(ids, inputs, strict=True)})
    half = infer(
        _halved(proto), [o], {i: v.astype(np.float16) for i, v in zip(ids, inputs, strict=True)}
    )
    assert half[o].dtype == np.float16
    np.testing.assert_allclose(half[o], single[o], rtol=1e-3)
    return half[o]


def _input(builder, shape):
    return builder.addInputTensor(popart.TensorInfo("FLOAT", shape))


@pytest.mark.follows("test_conversion_basic")
def test_conversion_basic():
    data = np.array([[1, 2]])

    def build(builder):
        i1 = _input(builder, data.shape)
        return [i1], builder.aiOnnx.identity([i1])

    _compare(build, [data])


D1 = np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]])
D2 = np.array([[0.1, 0.4, 0.2, 0.5, 0.3, 0.6, 0.4, 0.7]])


@pytest.mark.follows("test_conversion_with_mul")
def test_conversion_with_mul():
    def build(builder):
        i1, i2 = _input(builder, D1.shape), _input(builder, D2.shape)
        return [i1, i2], builder.aiOnnx.mul([i1, i2])

    half = _compare(build, [D1, D2])
    np.testing.assert_allclose(half, D1.astype(np.float16) * D2.astype(np.float16), rtol=1e-3)


@pytest.mark.follows("test_conversion_with_initializers")
def test_conversion_with_initializers():
    def build(builder):
        i1 = _input(builder, D2.shape)
        return [i1], builder.aiOnnx.add([i1, builder.aiOnnx.constant(D2.astype(np.float32))])

    _compare(build, [np.zeros(D2.shape)])


@pytest.mark.follows("test_conversions_with_mul_numpy")
def test_conversions_with_mul_numpy():
    # The tolerance the other tests use: float16 products differ beyond 1e-4, within 1e-3.
    single = D1.astype(np.float32) * D2.astype(np.float32)
    half = D1.astype(np.float16) * D2.astype(np.float16)
    assert not np.allclose(single, half, rtol=1e-04)
    assert np.allclose(single, half, rtol=1e-03)
