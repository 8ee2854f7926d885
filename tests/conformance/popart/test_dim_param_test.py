"""graphcore/popart tests/integration/dim_param_test.py: a model whose input has a symbolic
(dim_param) or negative dimension is refused unless InputShapeInfo gives its shape (Cpu)."""

import numpy as np
import onnx
import pytest

import popart


def _model(edit):
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 32, 32]), "input_0")
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 32, 32]), "input_1")
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    model = onnx.load_from_string(builder.getModelProto())
    edit(model.graph.input[0].type.tensor_type.shape.dim[0])
    return model.SerializeToString(), o, (i1, i2)


def _session(proto, out, **kwargs):
    return popart.InferenceSession(
        fnModel=proto,
        dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        **kwargs,
    )


def _set_dim_param(dim):
    dim.dim_param = "fubar"


def _set_negative(dim):
    dim.dim_value = -1


@pytest.mark.follows("test_model_with_unspecified_dim_params")
def test_model_with_unspecified_dim_params():
    proto, out, _ = _model(_set_dim_param)
    with pytest.raises(popart.popart_exception) as error:
        _session(proto, out)
    assert error.value.args[0] == (
        "Input tensor 'input_0' must be specified in InputShapeInfo, as it has shape "
        "[fubar, 2, 32, 32], which uses an unknown value 'fubar'."
    )


@pytest.mark.follows("test_model_with_negative_dim_values")
def test_model_with_negative_dim_values():
    proto, out, _ = _model(_set_negative)
    with pytest.raises(popart.popart_exception) as error:
        _session(proto, out)
    assert error.value.args[0] == (
        "Input tensor 'input_0' must be specified in InputShapeInfo, as it has shape "
        "[-1, 2, 32, 32], which uses an unknown value '-1'."
    )


@pytest.mark.follows("test_model_with_specified_dim_params")
def test_model_with_specified_dim_params():
    proto, out, (i1, i2) = _model(_set_dim_param)
    shapes = popart.InputShapeInfo()
    shapes.add("input_0", popart.TensorInfo("FLOAT", [1, 2, 32, 32]))
    session = _session(proto, out, inputShapeInfo=shapes)
    # (Beyond the original, which only builds it: the session runs with the given shape.)
    session.prepareDevice()
    a, b = (np.random.rand(1, 2, 32, 32).astype(np.float32) for _ in range(2))
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({i1: a, i2: b}, anchors))
    np.testing.assert_allclose(anchors[out], a + b)
