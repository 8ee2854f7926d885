"""graphcore/popart tests/integration/operators_test/expand_test.py: Expand (opset 8) to a
constant shape of int64 or int32, of a scalar, to fewer dims, the error for a shape that
does not broadcast, its gradient, and the same as a Mul by ones; the in-place variants also
look for ExpandInplace in the serialised IR (Cpu)."""

import json

import numpy as np
import pytest
from popart_op_checks import unbroadcast

import popart

OPSETS_8 = {"ai.onnx": 8, "ai.graphcore": 1}


def _check_inplace_ir(session):
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    assert len([op for op in ir["maingraph"] if op["type"] == "ExpandInplace"]) == 1


def _expand(op_tester, data, shape, inplace):
    """Expand `data` to `shape` and check values (in place, through an Identity) or the
    gradient (not in place)."""
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        o = builder.aiOnnx.expand([i1, builder.aiOnnx.constant(shape)])
        if inplace:
            o_identity = builder.aiOnnx.identity([o])
            builder.addOutputTensor(o_identity)
            return [o_identity]
        builder.addOutputTensor(o)
        return [o, g + o, g + i1]

    def reference(ref_data):
        expanded = data * np.ones(shape, np.float32)
        if inplace:
            return [expanded]
        d_y = ref_data.getOutputTensorGrad(0)
        return [expanded, d_y, unbroadcast(d_y, data.shape)]

    if inplace:
        op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
    session = op_tester.run(init_builder, reference, "infer" if inplace else "train", OPSETS_8)
    if inplace:
        _check_inplace_ir(session)


def _both_int_types(op_tester, data, shape, inplace):
    for int_type in (np.int64, np.int32):
        _expand(op_tester, data, np.array(shape, int_type), inplace)


def _rand(*shape):
    return np.random.rand(*shape).astype(np.float32)


@pytest.mark.follows("test_expand")
def test_expand(op_tester):
    _both_int_types(op_tester, _rand(3, 1), [2, 1, 6], False)


@pytest.mark.follows("test_expand_inplace")
def test_expand_inplace(op_tester):
    _both_int_types(op_tester, _rand(3, 1), [2, 1, 6], True)


@pytest.mark.follows("test_expand_smaller_output")
def test_expand_smaller_output(op_tester):
    _both_int_types(op_tester, _rand(3, 1), [2, 1, 1], False)


@pytest.mark.follows("test_expand_smaller_output_inplace")
def test_expand_smaller_output_inplace(op_tester):
    _both_int_types(op_tester, _rand(3, 1), [2, 1, 1], True)


def _non_one_smaller_output(op_tester, inplace):
    data = _rand(5, 4, 3)
    for int_type in (np.int64, np.int32):

        def init_builder(builder, int_type=int_type):
            i1 = builder.addInputTensor(data)
            c = builder.aiOnnx.constant(np.array([3, 4, 2], int_type))
            o = builder.aiOnnx.expand([i1, c])
            o = builder.aiOnnx.identity([o]) if inplace else o
            builder.addOutputTensor(o)
            return [o]

        if inplace:
            op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
        with pytest.raises(popart.popart_exception) as e_info:
            op_tester.run(init_builder, None, "infer")
        assert "corresponding dimensions must have the same value or one of them must be 1" in (
            str(e_info.value)
        )


@pytest.mark.follows("test_expand_non_one_smaller_output")
def test_expand_non_one_smaller_output(op_tester):
    _non_one_smaller_output(op_tester, False)


@pytest.mark.follows("test_expand_non_one_smaller_output_inplace")
def test_expand_non_one_smaller_output_inplace(op_tester):
    _non_one_smaller_output(op_tester, True)


@pytest.mark.follows("test_expand_scalar")
def test_expand_scalar(op_tester):
    _both_int_types(op_tester, np.array(3.0, np.float32), [2, 1, 6], False)


@pytest.mark.follows("test_expand_scalar_inplace")
def test_expand_scalar_inplace(op_tester):
    _both_int_types(op_tester, np.array(3.0, np.float32), [2, 1, 6], True)


@pytest.mark.follows("test_expand_unwind")
def test_expand_unwind(op_tester):
    d1, d3 = _rand(6), _rand(6, 3)
    for int_type in (np.int64, np.int32):
        shape = np.array([3, 6], int_type)

        def init_builder(builder, shape=shape):
            e = builder.aiOnnx.expand([builder.addInputTensor(d1), builder.aiOnnx.constant(shape)])
            m = builder.aiOnnx.matmul([e, builder.addInputTensor(d3)])
            builder.addOutputTensor(m)
            return [m]

        op_tester.run(init_builder, lambda _: [np.broadcast_to(d1, (3, 6)) @ d3], "infer", OPSETS_8)


@pytest.mark.follows("test_expand_mul")
@pytest.mark.parametrize("int_type", [np.int32, np.int64])
def test_expand_mul(int_type):
    """Training through Expand matches training through a Mul by ones, step by step."""
    in_ = np.random.random_sample([3, 1]).astype(np.float32)
    w = np.random.random_sample([3, 3]).astype(np.float32)
    shape = np.array([2, 1, 6], int_type)

    def session(expand_op):
        builder = popart.Builder()
        i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", in_.shape))
        w_in = builder.addInitializedInputTensor(w)
        mul = builder.aiOnnx.matmul([w_in, i1])
        if expand_op:
            o = builder.aiOnnx.expand([mul, builder.aiOnnx.constant(shape)])
        else:
            o = builder.aiOnnx.mul([mul, builder.aiOnnx.constant(np.ones(shape, np.float32))])
        builder.addOutputTensor(o)
        loss = builder.aiGraphcore.identityloss([o])
        g = popart.reservedGradientPrefix()
        anchor_ids = [o, g + o, g + i1, g + w_in]
        sess = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, anchor_ids),
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            optimizer=popart.ConstSGD(0.1),
            loss=loss,
        )
        anchors = sess.initAnchorArrays()
        sess.prepareDevice()
        sess.weightsFromHost()
        return sess, popart.PyStepIO({i1: in_}, anchors), anchors, anchor_ids

    sess1, stepio1, anchors1, ids1 = session(True)
    sess2, stepio2, anchors2, ids2 = session(False)
    first = None
    for _ in range(5):
        sess1.run(stepio1)
        sess2.run(stepio2)
        for k1, k2 in zip(ids1, ids2, strict=True):
            np.testing.assert_allclose(anchors1[k1], anchors2[k2], rtol=1e-5, atol=1e-6)
        first = anchors1[ids1[0]].copy() if first is None else first
    # The weights were trained: the output moved.
    assert not np.allclose(first, anchors1[ids1[0]])
