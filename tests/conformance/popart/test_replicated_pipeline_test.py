"""graphcore/popart tests/integration/pipelining_tests/replicated_pipeline_test.py: a model
pipelined over two IPUs and replicated twice gives, replica by replica, the anchors of the
same model unreplicated (inference), of the same replicated model unpipelined (inference),
and of the same replicated model unpipelined in training with gradient accumulation. The
original runs these on IPU hardware; here on emulated IPU Models (2 x 2 IPUs)."""

import numpy as np
import pytest

import popart
from conftest import create_test_device

REPLICAS = 2
BATCHES_PER_STEP = 4
BATCH = 8


def _anchors(pipelined, training, replicas, accumulation=1):
    np.random.seed(1)
    builder = popart.Builder()
    micro_batch = BATCH // accumulation
    shape_d0 = [micro_batch, 2, 4, 4]
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", shape_d0))
    w0 = builder.addInitializedInputTensor(np.ones([2, 2, 3, 3], np.float32))
    l0 = builder.addInputTensor(popart.TensorInfo("INT32", [micro_batch]))
    s0 = builder.aiOnnx.sin([d0], "s0")
    e0 = builder.aiOnnx.exp([s0], "e0")
    c0 = builder.aiOnnx.conv(
        [e0, w0], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1], debugContext="c0"
    )
    r0 = builder.reshape_const(builder.aiOnnx, [c0], [micro_batch, 32])
    out = builder.aiOnnx.softmax([r0], axis=1, debugContext="sfm")
    nll = builder.aiGraphcore.nllloss([out, l0], reduction=popart.ReductionType.Sum)
    for tensor, graph in ((s0, 0), (e0, 0), (c0, 0), (r0, 1), (out, 1), (nll, 1)):
        builder.virtualGraph(tensor, graph)
    art = popart.AnchorReturnType("All")
    anchors = {nll: art, w0: art, e0: art}
    if training:
        anchors[popart.reservedGradientPrefix() + d0] = art
    options = popart.SessionOptions()
    options.enablePipelining = pipelined
    options.enableGradientAccumulation = accumulation > 1
    options.accumulationFactor = accumulation
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    if replicas > 1:
        options.replicatedGraphCount = replicas
        options.enableReplicatedGraphs = True
    device = create_test_device("IpuModel2", 2 * replicas)
    try:
        flow = popart.DataFlow(BATCHES_PER_STEP, anchors)
        kwargs = dict(fnModel=builder.getModelProto(), dataFlow=flow, userOptions=options,
                      deviceInfo=device)  # fmt: skip
        if training:
            session = popart.TrainingSession(loss=nll, optimizer=popart.ConstSGD(0.01), **kwargs)
        else:
            session = popart.InferenceSession(**kwargs)
        session.prepareDevice()
        arrays = session.initAnchorArrays()
        label = np.random.randint(0, 4, [micro_batch]).astype(np.int32)
        outer = [BATCHES_PER_STEP] + ([accumulation] if accumulation > 1 else [])
        data = np.random.random_sample([*outer, *shape_d0]).astype(np.float32)
        labels = np.broadcast_to(label, [*outer, micro_batch])
        if replicas > 1:
            # Every replica gets the same samples (the replication axis follows the
            # accumulation's, or the batches').
            axis = len(outer)
            data = np.repeat(np.expand_dims(data, axis), replicas, axis)
            labels = np.repeat(np.expand_dims(labels, axis), replicas, axis)
        session.weightsFromHost()
        session.run(popart.PyStepIO({d0: data, l0: np.ascontiguousarray(labels)}, arrays))
    finally:
        device.detach()
    return arrays


@pytest.mark.follows("test_output_matches_replication_infer")
@pytest.mark.slow
def test_output_matches_replication_infer():
    single = _anchors(pipelined=True, training=False, replicas=1)
    replicated = _anchors(pipelined=True, training=False, replicas=REPLICAS)
    for tensor_id, value in single.items():
        for replica in range(REPLICAS):
            np.testing.assert_allclose(
                replicated[tensor_id][:, replica], value, rtol=1e-5, err_msg=tensor_id
            )


@pytest.mark.follows("test_output_matches_pipeline_infer")
def test_output_matches_pipeline_infer():
    pipelined = _anchors(pipelined=True, training=False, replicas=REPLICAS)
    plain = _anchors(pipelined=False, training=False, replicas=REPLICAS)
    for tensor_id, value in plain.items():
        np.testing.assert_allclose(pipelined[tensor_id], value, rtol=1e-5, err_msg=tensor_id)


@pytest.mark.follows("test_output_matches_pipeline_train")
def test_output_matches_pipeline_train():
    plain = _anchors(pipelined=False, training=True, replicas=REPLICAS, accumulation=4)
    pipelined = _anchors(pipelined=True, training=True, replicas=REPLICAS, accumulation=4)
    for tensor_id, value in plain.items():
        np.testing.assert_allclose(
            pipelined[tensor_id], value, rtol=1e-5, atol=1e-6, err_msg=tensor_id
        )
    # Both replicas saw the same samples, so they agree with each other.
    for value in pipelined.values():
        np.testing.assert_allclose(value[:, :, 0], value[:, :, 1], rtol=1e-6)
