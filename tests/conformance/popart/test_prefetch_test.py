"""graphcore/popart tests/integration/prefetch_test.py: the streamed input and label come
back unchanged as anchors (ALL) step after step when the data streams are prefetched, with
one or several batches per step and one or several samples per batch; with synthetic data
the streams are not connected, so the anchors do not hold the data the host gave. The
original runs them on IPU hardware; here on an emulated IPU."""

import numpy as np
import pytest

import popart


def _session(batches, batch_size, channels, size, synthetic, rng):
    shape = [batch_size, channels, size, size]
    builder = popart.Builder()
    w = builder.addInitializedInputTensor(rng.random(shape).astype(np.float32))
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", shape), "input")
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [batch_size]), "label")
    o = builder.aiOnnx.matmul([ip, w])
    o = builder.reshape_const(builder.aiOnnx, [o], [batch_size, channels * size * size])
    o = builder.aiOnnx.softmax([builder.aiOnnx.relu([o])])
    loss = builder.aiGraphcore.nllloss([o, lb])
    opts = popart.SessionOptions()
    opts.enablePrefetchDatastreams = True
    if synthetic:
        opts.syntheticDataMode = popart.SyntheticDataMode.Zeros
    art = popart.AnchorReturnType("All")
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(batches, {ip: art, lb: art}),
        loss=loss,
        optimizer=popart.ConstSGD(1.0),
        userOptions=opts,
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": 4}),
    )
    session.prepareDevice()
    step = [batches] if batches > 1 else []
    return session, step + shape, step + [batch_size]


def _run(batches, batch_size, synthetic=False, channels=2, size=3, steps=3):
    rng = np.random.default_rng(1)
    session, input_shape, label_shape = _session(
        batches, batch_size, channels, size, synthetic, rng
    )
    anchors = session.initAnchorArrays()
    for _ in range(steps):
        inputs = rng.random(input_shape).astype(np.float32)
        # Labels from 1: synthetic (zero) labels cannot equal them by chance.
        labels = rng.integers(1, 18, label_shape).astype(np.int32)
        for array in anchors.values():
            array.fill(-1)  # not whatever np.empty left there (freed host data, say)
        session.weightsFromHost()
        session.run(popart.PyStepIO({"input": inputs, "label": labels}, anchors))
        if synthetic:
            assert not np.allclose(anchors["input"], inputs)
            assert not np.array_equal(anchors["label"], labels)
        else:
            np.testing.assert_array_equal(anchors["input"], inputs)
            np.testing.assert_array_equal(anchors["label"], labels)


@pytest.mark.follows("test_prefetch_0")
def test_prefetch_0():
    _run(batches=1, batch_size=8, size=2)


@pytest.mark.follows("test_prefetch_1")
def test_prefetch_1():
    _run(batches=7, batch_size=1)


@pytest.mark.follows("test_prefetch_2")
def test_prefetch_2():
    _run(batches=7, batch_size=16)


@pytest.mark.follows("test_prefetch_synthetic")
def test_prefetch_synthetic():
    _run(batches=7, batch_size=16, synthetic=True)
