"""graphcore/popart tests/integration/anchorreturntype_test.py: what each anchor return type
(All, EveryN, Final, Sum) gives over batches per step, replicas and gradient-accumulation
steps, with implicit and explicit main loops, and the errors of bad return types (IpuModel2,
as the original's CMake runs it)."""

import numpy as np
import pytest

import popart

ALL = popart.AnchorReturnType("all")
FINAL = popart.AnchorReturnType("final")
SUM = popart.AnchorReturnType("sum")
EVERY1 = popart.AnchorReturnType("everyn", 1)
EVERY2 = popart.AnchorReturnType("everyn", 2)
EVERY4 = popart.AnchorReturnType("everyn", 4)
EIGHT = [1, 2, 3, 4, 5, 6, 7, 8]
PAIRS = [[1, 2], [3, 4], [5, 6], [7, 8]]

# (input shape, input data, batches per step, return type, replicas, explicit loops, expected)
INFERENCE_CASES = [
    ([], 1, 1, ALL, 1, True, 1),
    ([], 1, 1, EVERY1, 1, False, 1),
    ([], 1, 1, FINAL, 1, False, 1),
    ([], 1, 1, SUM, 1, False, 1),
    ([], EIGHT, 8, ALL, 1, False, EIGHT),
    ([], EIGHT, 8, EVERY4, 1, False, [4, 8]),
    ([], EIGHT, 8, FINAL, 1, False, 8),
    ([], EIGHT, 8, SUM, 1, True, 36),
    ([2], [1, 2], 1, EVERY1, 1, False, [1, 2]),
    ([2], [1, 2], 1, SUM, 1, True, [1, 2]),
    ([2], PAIRS, 4, ALL, 1, True, PAIRS),
    ([2], PAIRS, 4, EVERY2, 1, False, [[3, 4], [7, 8]]),
    ([2], PAIRS, 4, FINAL, 1, False, [7, 8]),
    ([2], PAIRS, 4, SUM, 1, False, [16, 20]),
    ([], PAIRS, 4, ALL, 2, False, PAIRS),
    ([], PAIRS, 4, EVERY2, 2, False, [[3, 4], [7, 8]]),
    ([], PAIRS, 4, FINAL, 2, False, [7, 8]),
    ([], PAIRS, 4, SUM, 2, True, [16, 20]),
]


def _device(num_ipus):
    return popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": num_ipus, "tilesPerIPU": 4, "ipuVersion": "ipu2"}
    )


def _options(explicit, replicas=1, accumulation=1):
    opts = popart.SessionOptions()
    opts.replicatedGraphCount = replicas
    opts.enableReplicatedGraphs = replicas > 1
    opts.accumulationFactor = accumulation
    opts.enableGradientAccumulation = accumulation > 1
    opts.enableExplicitMainLoops = explicit
    opts.useHostCopyOps = explicit
    return opts


@pytest.mark.follows("test_identity_inference_session")
@pytest.mark.parametrize("shape,data,bps,art,replicas,explicit,expected", INFERENCE_CASES)
def test_identity_inference_session(shape, data, bps, art, replicas, explicit, expected):
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", shape))
    o = builder.aiOnnx.identity([i1])
    builder.addOutputTensor(o)
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(bps, {o: art}),
        deviceInfo=_device(replicas),
        userOptions=_options(explicit, replicas=replicas),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({i1: np.array(data, dtype=np.float32)}, anchors))
    np.testing.assert_array_equal(anchors[o], expected)


BATCHES = [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]

# (input shape, data, batches per step, return type, accumulation steps, explicit, expected)
TRAINING_CASES = [
    ([2], BATCHES, 2, ALL, 2, True, BATCHES),
    ([2], BATCHES, 2, ALL, 2, False, BATCHES),
    ([2], BATCHES, 2, EVERY2, 2, False, [[3, 4], [7, 8]]),
    ([2], BATCHES, 2, FINAL, 2, False, [7, 8]),
    ([2], BATCHES, 2, SUM, 2, False, [16, 20]),
    ([2], [[1, 2]], 1, SUM, 1, True, [1, 2]),
    ([2], [[[1, 2], [3, 4]]], 1, SUM, 2, True, [4, 6]),
    ([2], [[1, 2], [3, 4]], 2, SUM, 1, True, [4, 6]),
    ([2], BATCHES, 2, SUM, 2, True, [16, 20]),
    ([2], [[[1, 2], [3, 4]]], 1, FINAL, 2, True, [3, 4]),
    ([2], BATCHES, 2, FINAL, 2, True, [7, 8]),
]


@pytest.mark.follows("test_simple_training_session")
@pytest.mark.parametrize("shape,data,bps,art,accumulation,explicit,expected", TRAINING_CASES)
def test_simple_training_session(shape, data, bps, art, accumulation, explicit, expected):
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", shape))
    w1 = builder.addInitializedInputTensor(np.zeros(shape, dtype=np.float32), "w1")
    o = builder.aiOnnx.add([i1, w1])
    loss = builder.aiGraphcore.l1loss([o], 0.0)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(bps, {o: art}),
        deviceInfo=_device(1),
        userOptions=_options(explicit, accumulation=accumulation),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({i1: np.array(data, dtype=np.float32)}, anchors))
    np.testing.assert_array_equal(anchors[o], expected)


def _refused(args, message):
    with pytest.raises(popart.popart_exception) as e_info:
        popart.AnchorReturnType(*args)
    assert e_info.value.args[0] == message


@pytest.mark.follows("test_invalid_art_id")
def test_invalid_art_id():
    _refused(("INVALID",), "Invalid anchor return type ID supplied: INVALID")


@pytest.mark.follows("test_invalid_period1")
def test_invalid_period1():
    _refused(("ALL", 2), "A return period should not be supplied for this anchor return type")


@pytest.mark.follows("test_invalid_period2")
def test_invalid_period2():
    _refused(("EveryN", -1), "Anchor return period must be greater than zero")


@pytest.mark.follows("test_invalid_period3")
def test_invalid_period3():
    _refused(("EveryN",), "Must specify return period with option 'EVERYN'")
