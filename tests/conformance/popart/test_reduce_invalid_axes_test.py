"""graphcore/popart tests/integration/operators_test/reduce_invalid_axes_test.py: every
reduction refuses an axis outside [-rank, rank - 1] with the IR's message (Cpu)."""

import pytest

import popart

SHAPE = [1]
RANK = len(SHAPE)
ONNX_OPS = ["l1", "l2", "logsum", "logsumexp", "max", "mean", "min", "prod", "sum", "sumsquare"]
INVALID_AXES = [-RANK - 1, RANK]


def _check(opset, op_name, axis):
    with pytest.raises(popart.popart_exception) as e_info:
        builder = popart.Builder()
        x = builder.addInputTensor(popart.TensorInfo("FLOAT", SHAPE), "input")
        ys = getattr(getattr(builder, opset), op_name)([x], axes=[axis])
        ys = ys if isinstance(ys, list) else [ys]
        for y in ys:
            builder.addOutputTensor(y)
        popart.InferenceSession(
            builder.getModelProto(),
            popart.DataFlow(1, {y: popart.AnchorReturnType("ALL") for y in ys}),
            popart.DeviceManager().createCpuDevice(),
        )
    assert e_info.value.args[0] == f"Axis {axis} is out of acceptable range [{-RANK}, {RANK - 1}]"


@pytest.mark.follows("test_reduce_invalid_axes_onnx_ops")
@pytest.mark.parametrize("axis", INVALID_AXES)
@pytest.mark.parametrize("op", ONNX_OPS)
def test_reduce_invalid_axes_onnx_ops(axis, op):
    _check("aiOnnx", "reduce" + op, axis)


@pytest.mark.follows("test_reduce_invalid_axes_graphcore_ops")
@pytest.mark.parametrize("axis", INVALID_AXES)
def test_reduce_invalid_axes_graphcore_ops(axis):
    _check("aiGraphcore", "reducemedian", axis)
