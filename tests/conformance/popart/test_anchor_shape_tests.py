"""graphcore/popart tests/integration/anchor_tests/anchor_shape_tests.py: a training step's
anchors (an activation, a weight, its gradient and, with gradient accumulation, its
accumulator) have the shapes their return type gives, for every combination of
accumulation factor (1, 4), pipelining (on, off) and return type (FINAL, ALL): ALL adds
the batches-per-step dimension and, with accumulation, the accumulation dimension. The
original runs it on IPU hardware; here on emulated IPUs."""

import itertools

import numpy as np
import pytest

import popart

BATCHES_PER_STEP = 7
BATCH_SIZE = 8
CHANNELS = 2
DATA_LEN = 5
WEIGHTS = "init_input"
GRADIENT = popart.reservedGradientPrefix() + WEIGHTS
ACCUM = popart.reservedAccumPrefix() + WEIGHTS


def _anchors(accumulation: int, pipelining: bool, return_type: str):
    micro_batch = BATCH_SIZE // accumulation
    builder = popart.Builder()
    ip = builder.addInputTensor(
        popart.TensorInfo("FLOAT", [micro_batch, CHANNELS, DATA_LEN, DATA_LEN])
    )
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [micro_batch]))
    w = builder.addInitializedInputTensor(np.ones([DATA_LEN, DATA_LEN], np.float32))
    b = builder.addInitializedInputTensor(np.ones([DATA_LEN], np.float32))
    assert w == WEIGHTS
    o = builder.aiOnnx.add([builder.aiOnnx.matmul([ip, w]), b])
    o = builder.reshape_const(builder.aiOnnx, [o], [micro_batch, CHANNELS * DATA_LEN * DATA_LEN])
    nll = builder.aiGraphcore.nllloss([o, lb])
    wanted = [o, GRADIENT, WEIGHTS] + ([ACCUM] if accumulation > 1 else [])
    data_flow = popart.DataFlow(
        BATCHES_PER_STEP, {t: popart.AnchorReturnType(return_type) for t in wanted}
    )
    opts = popart.SessionOptions()
    ipus = 1
    if pipelining:
        opts.enablePipelining = True
        opts.virtualGraphMode = popart.VirtualGraphMode.Auto
        ipus = 2
    if accumulation > 1:
        opts.enableGradientAccumulation = True
        opts.accumulationFactor = accumulation
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": ipus, "tilesPerIPU": 4})
    with device:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=data_flow,
            loss=nll,
            optimizer=popart.SGD(
                {
                    "defaultLearningRate": (1.0, True),
                    "defaultMomentum": (0.0, True),
                    "defaultWeightDecay": (0.0, False),
                    "defaultDampening": (0.0, True),
                }
            ),
            userOptions=opts,
            deviceInfo=device,
        )
        session.prepareDevice()
        input_shape = [micro_batch, CHANNELS, DATA_LEN, DATA_LEN]
        labels = np.arange(BATCH_SIZE, dtype=np.int32)
        if accumulation > 1:
            input_shape = [accumulation] + input_shape
            labels = labels.reshape([accumulation, -1])
        input_shape = [BATCHES_PER_STEP] + input_shape
        labels = np.repeat(labels[np.newaxis], BATCHES_PER_STEP, 0)
        anchors = session.initAnchorArrays()
        session.weightsFromHost()
        session.run(popart.PyStepIO({ip: np.ones(input_shape, np.float32), lb: labels}, anchors))
    return anchors, o


@pytest.mark.follows("test_all_anchor_returns")
@pytest.mark.parametrize(
    "accumulation, pipelining, return_type",
    list(itertools.product([4, 1], [True, False], ["FINAL", "ALL"])),
)
def test_all_anchor_returns(accumulation, pipelining, return_type):
    anchors, activation = _anchors(accumulation, pipelining, return_type)
    micro_batch = BATCH_SIZE // accumulation
    expected = {
        WEIGHTS: [DATA_LEN, DATA_LEN],
        activation: [micro_batch, CHANNELS * DATA_LEN * DATA_LEN],
        GRADIENT: [DATA_LEN, DATA_LEN],
        ACCUM: [DATA_LEN, DATA_LEN],
    }
    if return_type == "ALL":
        for key in expected:
            if accumulation > 1:
                expected[key] = [accumulation] + expected[key]
            expected[key] = [BATCHES_PER_STEP] + expected[key]
    assert sorted(anchors) == sorted(k for k in expected if accumulation > 1 or k != ACCUM)
    for key, array in anchors.items():
        assert list(array.shape) == expected[key], key
