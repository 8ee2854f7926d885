"""graphcore/popart tests/integration/session_api_tests/reset_host_weights_test.py:
resetHostWeights of an inference session from a training session's model, which holds an
extra initializer (SGD momentum's accumulator): refused naming it, then accepted with
ignoreWeightsInModelWithoutCorrespondingHostWeight, and the weights are the trained ones (Cpu)."""

import numpy as np
import pytest

import popart
from conftest import create_test_device


def _model_with_random_weights():
    builder = popart.Builder()
    i0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]))
    w0 = builder.addInitializedInputTensor(np.random.rand(2, 2).astype(np.float32))
    loss = builder.aiGraphcore.l1loss([builder.aiOnnx.matmul([i0, w0])], 0.1)
    builder.addOutputTensor(loss)
    return builder


@pytest.mark.follows("test_reset_host_weights_with_extra_tensor_in_onnx_model")
def test_reset_host_weights_with_extra_tensor_in_onnx_model(tmp_path):
    device = create_test_device()
    tr_builder = _model_with_random_weights()
    o = tr_builder.getOutputTensorIds()[0]
    tr_sess = popart.TrainingSession(
        fnModel=tr_builder.getModelProto(),
        dataFlow=popart.DataFlow(1, []),
        loss=o,
        optimizer=popart.SGD({"defaultMomentum": (0.01, True)}),
        deviceInfo=device,
    )
    tr_sess.prepareDevice()
    path = str(tmp_path / "tr_model.onnx")
    tr_sess.modelToHost(path)

    va_builder = _model_with_random_weights()
    va_opts = popart.SessionOptions()
    va_opts.constantWeights = False
    va_sess = popart.InferenceSession(
        fnModel=va_builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [o]),
        deviceInfo=device,
        userOptions=va_opts,
    )
    va_sess.prepareDevice()
    w_id = [w for w in va_builder.getInputTensorIds() if va_builder.isInitializer(w)][0]
    missing = popart.reservedAcclPrefix() + w_id
    with pytest.raises(popart.popart_exception) as e_info:
        va_sess.resetHostWeights(path)
    assert e_info.value.args[0] == f"resetWeights, no tensor '{missing}' in tensors"
    va_sess.resetHostWeights(path, ignoreWeightsInModelWithoutCorrespondingHostWeight=True)

    # The validation session now holds the training session's weight.
    import onnx

    trained = {
        init.name: onnx.numpy_helper.to_array(init) for init in onnx.load(path).graph.initializer
    }
    va_sess.weightsFromHost()
    va_sess.weightsToHost()
    weights = {w_id: np.empty((2, 2), np.float32)}
    va_sess.readWeights(popart.PyWeightsIO(weights))
    np.testing.assert_array_equal(weights[w_id], trained[w_id])
