"""graphcore/popart tests/integration/anchor_tests/anchor_output_test_2.py: a replicated
training step with the output, the input, a weight and the gradients of both anchored
(return type ALL) gives the same anchors with prefetched data streams as without. (The
original's comparison sits, by its indentation, after a return and never runs; here it
runs, with labels in the classes' range, and the streamed input must come back as it was
fed.) The original runs it on IPU hardware; here on emulated IPUs."""

import numpy as np
import pytest

import popart

BATCHES_PER_STEP = 7
REPLICAS = 4
BATCH_SIZE = 16
CHANNELS = 2
DATA_LEN = 3
LEARNING_RATE = 1.0e-3


def _anchors(prefetch, in_array, label_array, weight_array):
    micro_batch = BATCH_SIZE // REPLICAS
    builder = popart.Builder()
    w = builder.addInitializedInputTensor(weight_array)
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", list(weight_array.shape)))
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [micro_batch]))
    a = builder.aiOnnx.add([ip, w])
    o = builder.reshape_const(builder.aiOnnx, [a], [micro_batch, CHANNELS * DATA_LEN**2])
    o = builder.aiOnnx.softmax([builder.aiOnnx.relu([o])])
    builder.addOutputTensor(o)
    loss = builder.aiGraphcore.nllloss([o, lb])
    art = popart.AnchorReturnType("ALL")
    g = popart.reservedGradientPrefix()
    data_flow = popart.DataFlow(BATCHES_PER_STEP, {t: art for t in (o, ip, w, g + o, g + w)})
    opts = popart.SessionOptions()
    opts.replicatedGraphCount = REPLICAS
    opts.enableReplicatedGraphs = True
    opts.enablePrefetchDatastreams = prefetch
    opts.enableStochasticRounding = False
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": REPLICAS, "tilesPerIPU": 4})
    with device:
        session = popart.TrainingSession(
            builder.getModelProto(),
            deviceInfo=device,
            dataFlow=data_flow,
            loss=loss,
            optimizer=popart.ConstSGD(LEARNING_RATE),
            userOptions=opts,
        )
        session.prepareDevice()
        session.setRandomSeed(0)
        anchors = session.initAnchorArrays()
        session.weightsFromHost()
        session.run(popart.PyStepIO({ip: in_array, lb: label_array}, anchors))
    return anchors, ip, w


@pytest.mark.follows("test_anchor_output")
def test_anchor_output():
    rng = np.random.default_rng(0)
    micro_batch = BATCH_SIZE // REPLICAS
    shape = [micro_batch, CHANNELS, DATA_LEN, DATA_LEN]
    labels = rng.integers(0, CHANNELS * DATA_LEN**2, [BATCHES_PER_STEP, REPLICAS, micro_batch])
    labels = labels.astype(np.int32)
    inputs = rng.random([BATCHES_PER_STEP, REPLICAS, *shape]).astype(np.float32)
    weights = rng.random(shape).astype(np.float32)

    prefetched, ip, w = _anchors(True, inputs, labels, weights)
    plain, _, _ = _anchors(False, inputs, labels, weights)
    assert prefetched.keys() == plain.keys()
    for key in prefetched:
        assert prefetched[key].shape[:2] == (BATCHES_PER_STEP, REPLICAS)
        np.testing.assert_allclose(prefetched[key], plain[key])
    np.testing.assert_array_equal(plain[ip], inputs)
    # Every replica holds the same copy of the weight, which the steps move a little.
    for replica in range(1, REPLICAS):
        np.testing.assert_allclose(plain[w][:, replica], plain[w][:, 0])
    np.testing.assert_allclose(plain[w][0, 0], weights, atol=1e-3)
