"""graphcore/popart tests/integration/anchor_tests/anchor_output_test.py: anchoring a weight,
its gradient and its accumulator (All) in a pipelined (Auto virtual graphs), replicated,
gradient-accumulating training step: the weights do not change within a step's
accumulation, and a batch's last weights minus the accumulated gradients summed over the
replicas (learning rate 1) are the next batch's. The original runs on four IPUs of hardware;
here on four emulated IPUs."""

import numpy as np
import pytest
from popart_session_helpers import ipu_model_device

import popart

BATCHES_PER_STEP = 7
BATCH_SIZE = 16
CHANNELS = 2
DATA_LEN = 3
REPLICAS = 2
ACCUMULATION = 4


@pytest.mark.follows("test_anchor_output")
def test_anchor_output():
    np.random.seed(0)
    micro_batch = BATCH_SIZE // (ACCUMULATION * REPLICAS)
    input_shape = [micro_batch, CHANNELS, DATA_LEN, DATA_LEN]
    builder = popart.Builder()
    w = builder.addInitializedInputTensor(np.random.random_sample(input_shape).astype(np.float32))
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", input_shape))
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [micro_batch]))
    a = builder.aiOnnx.matmul([ip, w])
    o = builder.reshape_const(builder.aiOnnx, [a], [micro_batch, CHANNELS * DATA_LEN * DATA_LEN])
    o = builder.aiOnnx.softmax([builder.aiOnnx.relu([o])])
    nll = builder.aiGraphcore.nllloss([o, lb])
    grad = popart.reservedGradientPrefix() + w
    accl = popart.reservedAccumPrefix() + w
    every = popart.AnchorReturnType("All")
    data_flow = popart.DataFlow(
        BATCHES_PER_STEP, {o: every, a: every, ip: every, w: every, grad: every, accl: every}
    )
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.enableGradientAccumulation = True
    options.accumulationFactor = ACCUMULATION
    options.virtualGraphMode = popart.VirtualGraphMode.Auto
    options.replicatedGraphCount = REPLICAS
    options.enableReplicatedGraphs = True
    device = ipu_model_device(2 * REPLICAS)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=data_flow,
            loss=nll,
            optimizer=popart.ConstSGD(1.0),
            userOptions=options,
            deviceInfo=device,
        )
        session.prepareDevice()
        feed_shape = [BATCHES_PER_STEP, ACCUMULATION, REPLICAS, *input_shape]
        labels = np.ones([BATCH_SIZE], np.int32).reshape([ACCUMULATION, REPLICAS, -1])
        labels = np.repeat(labels[np.newaxis], BATCHES_PER_STEP, 0)
        anchors = session.initAnchorArrays()
        data = np.random.random_sample(feed_shape).astype(np.float32)
        session.weightsFromHost()
        session.run(popart.PyStepIO({ip: data, lb: labels}, anchors))
    finally:
        device.detach()

    weights = anchors[w]  # [bps, accumulation, replica, *shape]
    assert weights.shape == (BATCHES_PER_STEP, ACCUMULATION, REPLICAS, *input_shape)
    for batch in range(BATCHES_PER_STEP):
        for step in range(ACCUMULATION):
            np.testing.assert_allclose(weights[batch, step], weights[batch, 0])
    # The gradients are not all zero, so the weights do move from batch to batch.
    assert np.abs(anchors[accl]).max() > 0
    assert not np.allclose(weights[0, -1], weights[-1, -1])
    for batch in range(BATCHES_PER_STEP - 1):
        summed = np.sum(anchors[accl][batch, -1], axis=0)
        for replica in range(REPLICAS):
            np.testing.assert_allclose(
                weights[batch, -1, replica] - summed,
                weights[batch + 1, -1, replica],
                rtol=1e-5,
                atol=1e-6,
            )
