"""graphcore/popart tests/integration/decompose_gradient_summation_test.py: a weight shared by
four MatMuls in series (on one IPU, or one per IPU) gets the sum of their partial gradients;
decomposing that sum (`decomposeGradSum`) does not change the update. Here also against a
numpy backward pass (IpuModel2)."""

import numpy as np
import pytest

import popart
from conftest import create_test_device

SHAPE = [4, 4]
LAYERS = 4


def _numpy_update(x, w, rate):
    activations, pre = [x], []
    for _ in range(LAYERS):
        pre.append(activations[-1] @ w)
        activations.append(np.maximum(pre[-1], 0))
    # identityloss reduces by Mean by default: every element of the output has 1/16.
    upstream = np.full(SHAPE, 1.0 / np.prod(SHAPE))
    gradient = np.zeros_like(w)
    for layer in reversed(range(LAYERS)):
        upstream = upstream * (pre[layer] > 0)
        gradient += activations[layer].T @ upstream
        upstream = upstream @ w.T
    return w - rate * gradient


@pytest.mark.follows("test_decompose_gradient_sum")
@pytest.mark.parametrize("sharded", [False, True])
def test_decompose_gradient_sum(sharded):
    np.random.seed(0)
    builder = popart.Builder()
    data = builder.addInputTensor(popart.TensorInfo("FLOAT", SHAPE))
    w_init = np.random.rand(*SHAPE).astype(np.float32)
    w = builder.addInitializedInputTensor(w_init)
    act = data
    for layer in range(LAYERS):
        with builder.virtualGraph(layer if sharded else 0):
            act = builder.aiOnnx.relu([builder.aiOnnx.matmul([act, w])])
    loss = builder.aiGraphcore.identityloss([act])
    x = np.random.rand(*SHAPE).astype(np.float32)

    def updated(decompose):
        options = popart.SessionOptions()
        options.decomposeGradSum = decompose
        if sharded:
            builder.virtualGraph(loss, LAYERS - 1)
            options.virtualGraphMode = popart.VirtualGraphMode.Manual
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, [w]),
            deviceInfo=create_test_device("IpuModel2", LAYERS if sharded else 1),
            optimizer=popart.ConstSGD(0.1),
            loss=loss,
            userOptions=options,
        )
        anchors = session.initAnchorArrays()
        session.prepareDevice()
        session.weightsFromHost()
        session.run(popart.PyStepIO({data: x}, anchors))
        return anchors[w]

    decomposed, summed = updated(True), updated(False)
    assert not np.allclose(w_init, decomposed)
    np.testing.assert_allclose(summed, decomposed, rtol=1e-6)
    np.testing.assert_allclose(decomposed, _numpy_update(x, w_init, 0.1), rtol=1e-5)
