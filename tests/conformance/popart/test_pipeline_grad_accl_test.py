"""graphcore/popart tests/integration/pipelining_tests/pipeline_grad_accl_test.py: with gradient
accumulation, a pipelined model over three IPUs (a chain of matmuls, and a Sin-Exp-Conv-
Softmax model) gives the anchors of the same model unpipelined on one IPU, and an
accumulation factor smaller than the pipeline's stages is refused (IpuModel2)."""

import numpy as np
import pytest

import popart
from conftest import create_test_device

HIDDEN = 16
BATCH = 32
ACCUMULATION = 8
BATCHES_PER_STEP = 2


def _session(builder, anchors, loss, options, num_ipus, bps):
    device = create_test_device("IpuModel2", num_ipus)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(bps, anchors),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
        userOptions=options,
        deviceInfo=device,
    )
    return session, device


def _options(pipelined, factor, manual):
    options = popart.SessionOptions()
    options.enablePipelining = pipelined
    options.enableGradientAccumulation = True
    options.accumulationFactor = factor
    if manual:
        options.virtualGraphMode = popart.VirtualGraphMode.Manual
    return options


def _model1_anchors(sharded, labels):
    micro_batch = BATCH // ACCUMULATION
    builder = popart.Builder()
    x = input_ = builder.addInputTensor(popart.TensorInfo("FLOAT", [micro_batch, HIDDEN]))
    weights = []
    for ipu in range(3):
        with builder.virtualGraph(ipu if sharded else 0):
            for i in range(2):
                w = builder.addInitializedInputTensor(
                    np.ones([HIDDEN, HIDDEN], np.float32), f"weight_{ipu}_{i}"
                )
                weights.append(w)
                x = builder.aiOnnx.matmul([x, w])
            if ipu == 2:
                label = builder.addInputTensor("INT32", [micro_batch])
                x = builder.aiGraphcore.nllloss([x, label])
    art = popart.AnchorReturnType("All")
    anchors = {x: art, weights[-1]: art, popart.reservedGradientPrefix() + x: art}
    session, device = _session(
        builder, anchors, x, _options(sharded, ACCUMULATION, True), 3 if sharded else 1,
        BATCHES_PER_STEP,
    )  # fmt: skip
    try:
        arrays = session.initAnchorArrays()
        session.prepareDevice()
        steps = BATCHES_PER_STEP * ACCUMULATION
        feed = {
            input_: np.ones([steps, micro_batch, HIDDEN], np.float32),
            label: np.repeat(labels[np.newaxis], BATCHES_PER_STEP, 0).reshape(steps, -1),
        }
        session.weightsFromHost()
        session.run(popart.PyStepIO(feed, arrays))
    finally:
        device.detach()
    return arrays


@pytest.mark.follows("test_pipeline_grad_accl_model1")
def test_pipeline_grad_accl_model1():
    np.random.seed(1234)
    labels = np.random.randint(0, HIDDEN, BATCH).astype(np.int32)
    plain = _model1_anchors(False, labels)
    pipelined = _model1_anchors(True, labels)
    assert list(plain) == list(pipelined)
    for tensor_id, value in plain.items():
        np.testing.assert_allclose(value, pipelined[tensor_id], rtol=1e-5, err_msg=tensor_id)
    # (Beyond the original) numpy's first loss: ones through six matmuls of ones are all
    # 16 ** 6, which NllLoss takes as the labels' probabilities.
    loss_id = next(k for k in plain if k.startswith("Nll"))
    np.testing.assert_allclose(pipelined[loss_id][0, 0], -np.log(float(HIDDEN) ** 6), rtol=1e-5)


def _model2_anchors(sharded, factor, runs=2):
    np.random.seed(1234)
    micro_batch = BATCH // factor
    builder = popart.Builder()
    shape_d0 = [micro_batch, 2, 4, 4]
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", shape_d0), "inp")
    w0 = builder.addInitializedInputTensor(np.ones([2, 2, 3, 3], np.float32), "weights")
    s0 = builder.aiOnnx.sin([d0], "s0")
    e0 = builder.aiOnnx.exp([s0], "e0")
    c0 = builder.aiOnnx.conv(
        [e0, w0], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1], debugContext="c0"
    )
    r0 = builder.reshape_const(builder.aiOnnx, [c0], [micro_batch, 32])
    out = builder.aiOnnx.softmax([r0], axis=1, debugContext="sfm")
    l0 = builder.addInputTensor(popart.TensorInfo("INT32", [micro_batch]), "label")
    nll = builder.aiGraphcore.nllloss([out, l0])
    art = popart.AnchorReturnType("All")
    anchors = {nll: art, w0: art, e0: art, s0: art, c0: art}
    anchors[popart.reservedGradientPrefix() + d0] = art
    if sharded:
        for tensor, graph in ((s0, 0), (e0, 1), (c0, 1), (r0, 2), (out, 2), (nll, 2)):
            builder.virtualGraph(tensor, graph)
    session, device = _session(
        builder, anchors, nll, _options(sharded, factor, sharded), 3 if sharded else 1, 1
    )
    try:
        arrays = session.initAnchorArrays()
        session.prepareDevice()
        label = np.random.randint(0, 32, [BATCH]).astype(np.int32).reshape(factor, -1)
        feed = {d0: np.ones([factor, *shape_d0], np.float32), l0: label}
        session.weightsFromHost()
        for _ in range(runs):
            session.run(popart.PyStepIO(feed, arrays))
    finally:
        device.detach()
    return arrays, e0


@pytest.mark.follows("test_pipeline_grad_accl_model2")
def test_pipeline_grad_accl_model2():
    plain, _ = _model2_anchors(False, ACCUMULATION)
    pipelined, e0 = _model2_anchors(True, ACCUMULATION)
    for tensor_id, value in plain.items():
        np.testing.assert_allclose(
            value, pipelined[tensor_id], rtol=1e-5, atol=1e-7, err_msg=tensor_id
        )
    # (Beyond the original) the activations are numpy's.
    np.testing.assert_allclose(
        pipelined[e0], np.exp(np.sin(np.ones_like(pipelined[e0]))), rtol=1e-6
    )


@pytest.mark.follows("test_invalid_grad_accl_size")
def test_invalid_grad_accl_size():
    with pytest.raises(popart.popart_exception) as error:
        _model2_anchors(True, 1)
    assert error.value.args[0].startswith("For pipelining, depth (gradient accumulation factor)")
