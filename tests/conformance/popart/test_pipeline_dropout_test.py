"""graphcore/popart tests/integration/pipelining_tests/pipeline_dropout_test.py: in a model
pipelined over four IPUs (a dropout per IPU), each dropout's backward pass masks the
elements its forward pass dropped, also with pipeline recomputation. The original runs
these on IPU hardware; here on emulated IPU Models."""

import numpy as np
import pytest

import popart
from conftest import create_test_device

LAYERS = 4
BATCHES_PER_STEP = 2 * LAYERS - 1  # fills a training pipeline of four IPUs
RATIO = 0.5


def _run(recompute):
    g = popart.reservedGradientPrefix()
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    dropouts, inputs = [], []
    x = ip
    for ipu in range(LAYERS):
        with builder.virtualGraph(ipu):
            identity = builder.aiOnnx.identity([x])
            [dropout] = builder.aiOnnx.dropout([identity], num_outputs=1, ratio=RATIO)
            if recompute:
                builder.aiOnnx.relu([dropout])
            # Adding the layer's input keeps every dropout's inputs (both passes) non-zero.
            x = builder.aiOnnx.add([x, dropout])
        dropouts.append((dropout, g + identity, identity))
        inputs += [identity, g + dropout]
    with builder.virtualGraph(LAYERS - 1):
        loss = builder.aiGraphcore.identityloss([x])
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.enablePipelining = True
    if recompute:
        options.autoRecomputation = popart.RecomputationType.Pipeline
    anchors = list(dict.fromkeys([t for triple in dropouts for t in triple] + inputs))
    device = create_test_device("IpuModel2", LAYERS)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(BATCHES_PER_STEP, anchors),
            optimizer=popart.ConstSGD(0.1),
            loss=loss,
            userOptions=options,
            patterns=popart.Patterns(popart.PatternsLevel.Default),
            deviceInfo=device,
        )
        session.prepareDevice()
        session.weightsFromHost()
        arrays = session.initAnchorArrays()
        session.setRandomSeed(0)
        data = np.ones([BATCHES_PER_STEP, 10], np.float32)
        session.run(popart.PyStepIO({ip: data}, arrays))
    finally:
        device.detach()
    for tensor_id in inputs:
        assert np.all(arrays[tensor_id] != 0), tensor_id
    for forward, backward, dropout_input in dropouts:
        # The same mask in both passes: dropped elements are zero in both, kept ones scaled.
        np.testing.assert_array_equal(np.sign(arrays[forward]), np.sign(arrays[backward]))
        kept = arrays[forward] != 0
        # (Beyond the original) it dropped some, and scaled the kept ones by 1 / (1 - ratio).
        assert 0 < kept.mean() < 1
        np.testing.assert_allclose(
            arrays[forward][kept], arrays[dropout_input][kept] / (1 - RATIO), rtol=1e-6
        )


@pytest.mark.follows("test_pipelined_dropout")
def test_pipelined_dropout():
    _run(recompute=False)


@pytest.mark.follows("test_pipelined_recomputed_dropout")
def test_pipelined_recomputed_dropout():
    _run(recompute=True)
