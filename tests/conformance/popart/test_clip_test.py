"""graphcore/popart tests/integration/operators_test/clip_test.py: Clip-11 whose min or max
is not a constant is refused, naming the op and the input without data (Cpu)."""

import numpy as np
import pytest

import popart


def _session(min_is_input, max_is_input, name=None):
    d1 = (np.random.rand(2, 7) * 6 - 3).astype(np.float32)
    d_min = np.array([-1.5], dtype=np.float32)
    d_max = np.array([1.5], dtype=np.float32)
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo(d1), "d1")
    if min_is_input:
        t_min = builder.addInputTensor(popart.TensorInfo(d_min), "tmin")
    else:
        t_min = builder.aiOnnxOpset11.constant(d_min, False)
    if max_is_input:
        t_max = builder.addInputTensor(popart.TensorInfo(d_max), "tmax")
    else:
        t_max = builder.aiOnnxOpset11.constant(d_max, False)
    args = [[i1, t_min, t_max]] + ([name] if name else [])
    o = builder.aiOnnxOpset11.clip(*args)
    builder.addOutputTensor(o)
    with pytest.raises(Exception) as info:
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(5, {o: popart.AnchorReturnType("ALL")}),
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            userOptions=popart.SessionOptions(),
        )
    return str(info.value)


@pytest.mark.follows("test_no_min_max_values_at_model_build")
def test_no_min_max_values_at_model_build():
    assert _session(True, True, "MyClip11") == (
        "Op MyClip11(ai.onnx.Clip:11), inputs=[d1] currently only supports constant min/max "
        "parameters. Input 'min' (tmin) has no data."
    )


@pytest.mark.follows("test_no_min_value_at_model_build")
def test_no_min_value_at_model_build():
    assert _session(True, False) == (
        "Op (ai.onnx.Clip:11), inputs=[d1] currently only supports constant min/max "
        "parameters. Input 'min' (tmin) has no data."
    )


@pytest.mark.follows("test_no_max_value_at_model_build")
def test_no_max_value_at_model_build():
    assert _session(False, True) == (
        "Op (ai.onnx.Clip:11), inputs=[d1] currently only supports constant min/max "
        "parameters. Input 'max' (tmax) has no data."
    )
