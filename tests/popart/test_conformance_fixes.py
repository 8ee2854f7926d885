"""Behaviours of the original found while porting its integration tests."""

from __future__ import annotations

import numpy as np
import pytest

import popart


def _infer(builder, output, feeds):
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {output: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO(feeds, anchors))
    return anchors[output]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_incrementmod_keeps_the_sign_of_the_dividend_as_fmod(dtype):
    x = np.array([5, -5, -7, 1], dtype)
    builder = popart.Builder()
    i = builder.addInputTensor(popart.TensorInfo(x))
    out = builder.aiGraphcore.incrementmod([i], 3.0, 4.0)
    builder.addOutputTensor(out)
    np.testing.assert_array_equal(_infer(builder, out, {i: x}), np.fmod(x + 3, 4).astype(dtype))


def test_inputs_that_do_not_broadcast_fail_with_the_irs_message():
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    a = builder.addInputTensor(popart.TensorInfo("FLOAT", [3, 2]), "A")
    b = builder.addInputTensor(popart.TensorInfo("FLOAT", [4]), "B")
    c = builder.aiOnnx.mul([a, b], "C")
    builder.addOutputTensor(c)
    with pytest.raises(popart.popart_exception) as error:
        _infer(builder, c, {})
    assert str(error.value).startswith("np broadcasting failed on 'Op(ai.onnx.Mul:7")
    assert "frames [3, 2] and [4] are not aligned" in str(error.value)


def test_matmul_with_a_scalar_rhs_fails_with_the_irs_message():
    builder = popart.Builder()
    a = builder.addInputTensor(popart.TensorInfo("FLOAT", [3, 2]), "a")
    b = builder.addInputTensor(popart.TensorInfo("FLOAT", []), "b")
    c = builder.aiOnnx.matmul([a, b])
    builder.addOutputTensor(c)
    with pytest.raises(popart.popart_exception, match="doesn't support scalar tensor b as the rhs"):
        _infer(builder, c, {})


def test_an_explicit_empty_axes_list_reduces_over_no_axis():
    x = np.random.rand(2, 3).astype(np.float32)
    builder = popart.Builder()
    i = builder.addInputTensor(popart.TensorInfo(x))
    out = builder.aiOnnx.reducelogsum([i], axes=[], keepdims=False)
    all_axes = builder.aiOnnx.reducesum([i], keepdims=False)
    builder.addOutputTensor(out)
    builder.addOutputTensor(all_axes)
    np.testing.assert_allclose(_infer(builder, out, {i: x}), np.log(x), rtol=1e-6)
    np.testing.assert_allclose(_infer(builder, all_axes, {i: x}), x.sum(), rtol=1e-6)


@pytest.mark.parametrize("axis", [-3, 2])
def test_a_reduction_axis_out_of_range_is_refused(axis):
    builder = popart.Builder()
    i = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]))
    out = builder.aiOnnx.reducemax([i], axes=[axis])
    builder.addOutputTensor(out)
    with pytest.raises(popart.popart_exception, match=r"out of acceptable range \[-2, 1\]"):
        _infer(builder, out, {})


def test_flatten_takes_a_negative_axis_before_opset_11():
    x = np.random.rand(2, 3, 4).astype(np.float32)
    builder = popart.Builder(opsets={"ai.onnx": 10, "ai.graphcore": 1})
    i = builder.addInputTensor(popart.TensorInfo(x))
    out = builder.aiOnnx.flatten([i], axis=-1)
    builder.addOutputTensor(out)
    np.testing.assert_array_equal(_infer(builder, out, {i: x}), x.reshape(6, 4))


def test_float16_times_a_float32_scalar_is_float16():
    x = np.array([[1.5], [2.0]], np.float16)
    s = np.array(3.0, np.float32)
    builder = popart.Builder()
    i = builder.addInputTensor(popart.TensorInfo(x))
    j = builder.addInputTensor(popart.TensorInfo(s))
    out = builder.aiOnnx.mul([i, j])
    builder.addOutputTensor(out)
    result = _infer(builder, out, {i: x, j: s})
    assert result.dtype == np.float16
    np.testing.assert_array_equal(result, x * np.float16(3))


def test_squeeze_with_unsorted_axes_before_opset_13():
    x = np.random.rand(2, 1, 3, 1).astype(np.float32)
    builder = popart.Builder()
    i = builder.addInputTensor(popart.TensorInfo(x))
    out = builder.aiOnnx.squeeze([i], axes=[3, 1])
    builder.addOutputTensor(out)
    assert builder.getTensorShape(out) == [2, 3]
    np.testing.assert_array_equal(_infer(builder, out, {i: x}), x.reshape(2, 3))


def test_gradient_of_an_intermediate_tensor_of_a_model_without_weights():
    x = np.arange(1, 5, dtype=np.float32)
    builder = popart.Builder()
    i = builder.addInputTensor(popart.TensorInfo(x))
    scaled = builder.aiGraphcore.scale([i], 0.5)
    square = builder.aiOnnx.mul([scaled, scaled])
    loss = builder.aiGraphcore.identityloss([square], reduction=popart.ReductionType.Sum)
    grad = popart.reservedGradientPrefix() + scaled
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {grad: popart.AnchorReturnType("All")}),
        loss=loss,
        optimizer=popart.ConstSGD(0.1),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({i: x}, anchors))
    np.testing.assert_allclose(anchors[grad], 2 * (0.5 * x))  # d(s^2)/ds


def test_a_loop_carried_value_keeps_the_loop_inputs_shape():
    builder = popart.Builder()
    trips = builder.aiOnnx.constant(np.array(3, np.int64))
    cond = builder.aiOnnx.constant(np.array(True))
    start = builder.addInputTensor(popart.TensorInfo("FLOAT", [6]))
    body = builder.createSubgraphBuilder()
    body.addInputTensor(popart.TensorInfo("INT64", []))
    body_cond = body.addInputTensor(popart.TensorInfo("BOOL", []))
    carried = body.addInputTensor(popart.TensorInfo("FLOAT", [2]))  # declared smaller
    body.addOutputTensor(body_cond)
    body.addOutputTensor(body.aiOnnx.add([carried, carried]))
    out = builder.aiOnnx.loop([trips, cond, start], 1, body)[0]
    builder.addOutputTensor(out)
    assert builder.getTensorShape(out) == [6]
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(_infer(builder, out, {start: x}), 8 * x)
