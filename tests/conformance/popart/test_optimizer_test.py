"""graphcore/popart tests/integration/optimizer_test.py: SGD with values streamed from the
host against constant ones, updated between runs, a float16 model, and a zero learning rate
(which a constant SGD refuses) (Cpu)."""

import numpy as np
import pytest

import popart

STEPS = 2
SHAPE = [1, 2, 4, 4]


def _train_session(anchors, optimizer):
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", SHAPE))
    i2 = builder.addInitializedInputTensor(np.ones([2, 2, 3, 3], dtype=np.float32))
    window = {"dilations": [1, 1], "pads": [1, 1, 1, 1], "strides": [1, 1]}
    c2 = builder.aiOnnx.conv([builder.aiOnnx.conv([i1, i2], **window), i2], **window)
    loss = builder.aiGraphcore.l1loss([c2], 0.1)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(STEPS, anchors),
        loss=loss,
        optimizer=optimizer,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    return session, {i1: np.ones([STEPS, *SHAPE], dtype=np.float32)}


def _sgd(lr, wd, ls, const):
    return popart.SGD(
        {
            "defaultLearningRate": (lr, const),
            "defaultWeightDecay": (wd, const),
            "lossScaling": (ls, const),
        }
    )


@pytest.mark.follows("test_sgd_param_check")
def test_sgd_param_check():
    lr_name = popart.reservedDefaultScaledLearningRate0Prefix() + "FLOAT"
    anchors = {lr_name: popart.AnchorReturnType("All")}
    session, inputs = _train_session(anchors, _sgd(0.5, 0.6, 10.0, False))
    arrays = session.initAnchorArrays()
    session.updateOptimizerFromHost(_sgd(0.25, 0.5, 2.0, False))
    session.run(popart.PyStepIO(inputs, arrays))
    assert np.array_equal(arrays[lr_name][0], np.float32(0.25) / np.float32(2.0))


@pytest.mark.follows("test_constsgd_vs_sgd")
def test_constsgd_vs_sgd():
    lr, wd, ls = 0.01, 0.01, 1000
    anchors = {"L1:0": popart.AnchorReturnType("All")}
    const_session, const_inputs = _train_session(anchors, _sgd(lr, wd, ls, True))
    user_session, user_inputs = _train_session(anchors, _sgd(lr, wd, ls, False))
    const_arrays = const_session.initAnchorArrays()
    user_arrays = user_session.initAnchorArrays()
    for step in range(3):
        if step == 2:
            user_session.updateOptimizerFromHost(_sgd(2 * lr, 2 * wd, 2 * ls, False))
        const_session.run(popart.PyStepIO(const_inputs, const_arrays))
        user_session.run(popart.PyStepIO(user_inputs, user_arrays))
        if step < 2:
            np.testing.assert_array_equal(user_arrays["L1:0"], const_arrays["L1:0"])
        else:
            # The first batch of the step ran with equal weights; the second saw the new rate.
            np.testing.assert_array_equal(user_arrays["L1:0"][0], const_arrays["L1:0"][0])
            assert not np.array_equal(user_arrays["L1:0"][1], const_arrays["L1:0"][1])


@pytest.mark.follows("test_sgd_with_float16_model")
def test_sgd_with_float16_model():
    input1 = np.zeros((2, 2, 4, 4), dtype=np.float16)
    builder = popart.Builder()
    inid1 = builder.addInputTensor(popart.TensorInfo(input1))
    inid2 = builder.addInitializedInputTensor(np.zeros((2, 2, 3, 3), np.float16))
    inid3 = builder.addInitializedInputTensor(np.zeros((2, 2, 3, 3), np.float16))
    window = {"dilations": [1, 1], "pads": [1, 1, 1, 1], "strides": [1, 1]}
    c2 = builder.aiOnnx.conv([builder.aiOnnx.conv([inid1, inid2], **window), inid3], **window)
    out = builder.aiGraphcore.identityloss([c2])
    grad = popart.reservedGradientPrefix() + inid1
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {grad: popart.AnchorReturnType("All")}),
        loss=out,
        optimizer=_sgd(0.1, 0.1, 1000, False),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO({inid1: input1}, arrays))
    # Zero weights: the input's gradient is zero, in float16.
    assert arrays[grad].dtype == np.float16
    np.testing.assert_array_equal(arrays[grad], np.zeros_like(input1))


@pytest.mark.follows("test_sgd_with_zero_learning_rate")
def test_sgd_with_zero_learning_rate():
    settings = {
        "defaultLearningRate": (0.5, False),
        "defaultWeightDecay": (0.6, False),
        "lossScaling": (10.0, False),
    }
    session, inputs = _train_session({}, popart.SGD(settings))
    arrays = session.initAnchorArrays()
    weights = {"init_input": np.empty([2, 2, 3, 3], dtype=np.float32)}
    weights_io = popart.PyWeightsIO(weights)
    session.readWeights(weights_io)
    initial = np.copy(weights["init_input"])
    session.run(popart.PyStepIO(inputs, arrays))
    session.weightsToHost()
    session.readWeights(weights_io)
    updated = np.copy(weights["init_input"])
    assert not np.array_equal(initial, updated)
    settings["defaultLearningRate"] = (0.0, True)
    with pytest.raises(popart.popart_exception) as e_info:
        session.updateOptimizerFromHost(popart.SGD(settings))
    assert e_info.value.args[0].startswith("Constant, zero learning rate in SGD")
    settings["defaultLearningRate"] = (0.0, False)
    session.updateOptimizerFromHost(popart.SGD(settings))
    session.weightsToHost()
    session.readWeights(weights_io)
    np.testing.assert_array_equal(weights["init_input"], updated)
