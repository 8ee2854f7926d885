"""graphcore/popart tests/integration/patterns_test.py: the patterns each PatternsLevel and
a list of names enable, changing one, and a training session whose loss input is an
anchored activation preparing under the default patterns (Cpu)."""

import numpy as np
import pytest

import popart

NAMES = (
    "PreUniRepl",
    "PostNRepl",
    "SoftMaxGradDirect",
    "OpToIdentity",
    "SubtractArg1GradOp",
    "InPlace",
)


def _enabled(patterns):
    return {name: getattr(patterns, name) for name in NAMES}


@pytest.mark.follows("test_patterns_default")
def test_patterns_default():
    patterns = popart.Patterns()
    assert _enabled(patterns) == dict.fromkeys(NAMES, True)
    assert str(patterns)


@pytest.mark.follows("test_patterns_none")
def test_patterns_none():
    patterns = popart.Patterns(popart.PatternsLevel.NoPatterns)
    assert _enabled(patterns) == dict.fromkeys(NAMES, False)
    assert str(patterns)


@pytest.mark.follows("test_patterns_all")
def test_patterns_all():
    patterns = popart.Patterns(popart.PatternsLevel.All)
    assert _enabled(patterns) == dict.fromkeys(NAMES, True)


@pytest.mark.follows("test_patterns_modify")
def test_patterns_modify():
    patterns = popart.Patterns()
    patterns.PreUniRepl = False
    assert _enabled(patterns) == {**dict.fromkeys(NAMES, True), "PreUniRepl": False}


@pytest.mark.follows("test_patterns_str")
def test_patterns_str():
    patterns = popart.Patterns(["PostNRepl", "InPlace"])
    assert patterns.PostNRepl is True
    assert patterns.InPlace is True
    assert patterns.SoftMaxGradDirect is False


@pytest.mark.follows("test_loss_inputs_untouched")
def test_loss_inputs_untouched():
    batches, samples, height = 5, 48, 32
    builder = popart.Builder()
    i0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [samples, height, height]))
    w0 = builder.addInitializedInputTensor(np.zeros([height, height], np.float32))
    x = builder.aiOnnx.matmul([i0, w0])
    loss = builder.aiGraphcore.identityloss([x])
    builder.addOutputTensor(x)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(batches, {x: popart.AnchorReturnType("All")}),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
        patterns=popart.Patterns(popart.PatternsLevel.Default),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    data = np.ones([batches, samples, height, height], np.float32)
    session.run(popart.PyStepIO({i0: data}, anchors))
    # The anchored loss input is the activation itself: zero weights give zeros at first.
    assert anchors[x].shape == (batches, samples, height, height)
    np.testing.assert_array_equal(anchors[x][0], 0.0)
