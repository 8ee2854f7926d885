"""graphcore/popart tests/integration/random_test.py: setRandomSeed before prepareDevice is
refused with the original's words; with stochastic rounding on, a seed can be set though no
op uses it; float16 stochastic rounding differs from round-to-nearest, from run to run and
from seed to seed, and repeats for the same seed; a training run resumed from a checkpoint
(modelToHost, the seed and the RNG state) draws the same dropout mask. The original's CMake
runs this file on IPU hardware; here on emulated IPUs."""

import numpy as np
import pytest
from popart_session_helpers import ipu_model_device

import popart


@pytest.mark.follows("test_set_random_seed_error")
def test_set_random_seed_error():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    [o] = builder.aiOnnx.dropout([i1], num_outputs=1, ratio=0.3)
    loss = builder.aiGraphcore.identityloss([o])
    device = ipu_model_device(2)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
            optimizer=popart.ConstSGD(0.1),
            loss=loss,
            userOptions=popart.SessionOptions(),
            deviceInfo=device,
        )
        with pytest.raises(popart.popart_exception) as error:
            session.setRandomSeed(0)
    finally:
        device.detach()
    assert error.value.args[0] == (
        "Devicex::prepare() must be called before "
        "Devicex::setRandomSeedFromHost(uint64_t) is called."
    )


@pytest.mark.follows("test_stochastic_rounding")
def test_stochastic_rounding():
    np.random.seed(0)
    d1 = np.random.rand(1, 3, 2, 2).astype(np.float16) * 100
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo(d1))
    params = [
        builder.addInitializedInputTensor(np.random.rand(3).astype(np.float16)) for _ in range(4)
    ]
    o_y = builder.aiOnnx.batchnormalization([i1, *params], 5, 1e-05, 0.1)[0]
    loss = builder.aiGraphcore.identityloss([o_y])
    builder.addOutputTensor(o_y)
    options = popart.SessionOptions()
    options.enableStochasticRounding = True
    device = ipu_model_device()
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            optimizer=popart.ConstSGD(0.1),
            loss=loss,
            dataFlow=popart.DataFlow(1, {o_y: popart.AnchorReturnType("All")}),
            deviceInfo=device,
            userOptions=options,
        )
        session.initAnchorArrays()
        session.prepareDevice()
        session.setRandomSeed(0)
    finally:
        device.detach()


@pytest.mark.follows("test_stochastic_rounding_behaviour")
def test_stochastic_rounding_behaviour():
    np.random.seed(seed=1)
    shape = [10]
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT16", shape))
    d1 = builder.addInputTensor(popart.TensorInfo("FLOAT16", shape))
    out = builder.aiOnnx.add([d0, d1])
    options = popart.SessionOptions()
    options.enableStochasticRounding = True
    device = ipu_model_device()
    try:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {out: popart.AnchorReturnType("All")}),
            userOptions=options,
            deviceInfo=device,
        )
        anchors = session.initAnchorArrays()
        session.prepareDevice()
        data0 = np.ones(shape).astype(np.float16)
        data1 = 1e-3 * np.random.uniform(low=-1.0, high=1.0, size=shape).astype(np.float16)
        stepio = popart.PyStepIO({d0: data0, d1: data1}, anchors)
        nearest = data0 + data1

        session.setRandomSeed(1)
        session.run(stepio)
        first = np.copy(anchors[out])
        assert not np.array_equal(first, nearest)
        session.run(stepio)
        second = np.copy(anchors[out])
        assert not np.array_equal(first, second)
        session.setRandomSeed(12)
        session.run(stepio)
        assert not np.array_equal(anchors[out], first)
        for _ in range(2):
            session.setRandomSeed(1)
            session.run(stepio)
            np.testing.assert_array_equal(anchors[out], first)
            session.run(stepio)
            np.testing.assert_array_equal(anchors[out], second)
    finally:
        device.detach()


@pytest.mark.follows("test_reproducible_randomness_from_checkpoint")
def test_reproducible_randomness_from_checkpoint(tmp_path):
    np.random.seed(seed=1)
    shape = [10, 10]
    d0_data = np.random.rand(*shape).astype(np.float32)
    in_data = np.random.rand(*shape).astype(np.float32)
    builder = popart.Builder()
    t0 = builder.addInitializedInputTensor(d0_data)
    t1 = builder.addInputTensor("FLOAT", shape)
    t2 = builder.aiOnnx.dropout([t1], 1, 0.4)[0]
    mm = builder.aiOnnx.matmul([t0, t2])
    loss = builder.aiGraphcore.l1loss([mm], 0.1)
    path = str(tmp_path / "model.onnx")

    def session_on(device, model):
        options = popart.SessionOptions()
        options.enableLoadAndOffloadRNGState = True
        session = popart.TrainingSession(
            userOptions=options,
            fnModel=model,
            dataFlow=popart.DataFlow(1, [mm]),
            loss=loss,
            optimizer=popart.ConstSGD(0.1),
            deviceInfo=device,
        )
        session.prepareDevice()
        session.weightsFromHost()
        return session

    device = ipu_model_device()
    try:
        s0 = session_on(device, builder.getModelProto())
        anchors0 = s0.initAnchorArrays()
        s0.run(popart.PyStepIO({t1: in_data}, anchors0))
        s0.modelToHost(path)
        seed = s0.getRandomSeed()
        rng_state = s0.getRNGState()
        s0.run(popart.PyStepIO({t1: in_data}, anchors0))
    finally:
        device.detach()
    device = ipu_model_device()
    try:
        s1 = session_on(device, path)
        s1.setRandomSeed(seed)
        s1.setRNGState(rng_state)
        anchors1 = s1.initAnchorArrays()
        s1.run(popart.PyStepIO({t1: in_data}, anchors1))
    finally:
        device.detach()
    np.testing.assert_allclose(anchors0[mm], anchors1[mm])
