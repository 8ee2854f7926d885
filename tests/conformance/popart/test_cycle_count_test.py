"""graphcore/popart tests/integration/cycle_count_test.py: `getCycleCount` after a run with
`instrumentWithHardwareCycleCounter`, which here is openipu's cost model's estimate of the
program on the device's chip: it is the same when read twice and for the same program, and
grows linearly with the batches per step (synthetic data: no host streams); it needs a run
and the option first; with `hardwareInstrumentations` Inner, each IPU of a replica has an
"inner_ipu_<i>" counter, and an id the instrumentations did not make is an error. The
original runs it on IPU hardware; here on emulated IPUs."""

import numpy as np
import pytest

import popart


def _device(num_ipus=1):
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": num_ipus, "tilesPerIPU": 4})


def _simple_model_cycle_count(bps):
    builder = popart.Builder()
    d_shape = [200, 200]
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", d_shape))
    out = d0
    for _ in range(20):
        out = builder.aiOnnx.sin([out])
    opts = popart.SessionOptions()
    opts.instrumentWithHardwareCycleCounter = True
    opts.syntheticDataMode = popart.SyntheticDataMode.Zeros
    patterns = popart.Patterns(popart.PatternsLevel.NoPatterns)
    patterns.enableRuntimeAsserts(False)
    with _device() as device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(bps, {out: popart.AnchorReturnType("All")}),
            userOptions=opts,
            deviceInfo=device,
            patterns=patterns,
        )
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        data = np.random.rand(bps, *d_shape).astype(np.float32)
        session.run(popart.PyStepIO({d0: data}, anchors))
        cycles = session.getCycleCount()
        assert cycles == session.getCycleCount()
    return cycles


@pytest.mark.follows("test_check_sensible_cycle_counts")
def test_check_sensible_cycle_counts():
    cycles100 = _simple_model_cycle_count(bps=100)
    cycles100_ = _simple_model_cycle_count(bps=100)
    cycles200 = _simple_model_cycle_count(bps=200)
    cycles300 = _simple_model_cycle_count(bps=300)
    assert cycles100 > 0
    assert abs(cycles100 - cycles100_) / cycles100_ < 0.15
    diff_100_200, diff_200_300 = cycles200 - cycles100, cycles300 - cycles200
    assert diff_100_200 > 0
    assert abs(diff_100_200 - diff_200_300) / diff_200_300 < 0.15


def _exp_session(device, opts=None):
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]))
    p = builder.aiOnnx.exp([d0])
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [p]),
        userOptions=opts or popart.SessionOptions(),
        deviceInfo=device,
    )
    session.prepareDevice()
    return session, d0


def _run(session, d0):
    data = np.random.rand(1).astype(np.float32)
    session.run(popart.PyStepIO({d0: data}, session.initAnchorArrays()))


@pytest.mark.follows("test_get_cycle_count_requires_run")
def test_get_cycle_count_requires_run():
    opts = popart.SessionOptions()
    opts.instrumentWithHardwareCycleCounter = True
    with _device() as device:
        session, d0 = _exp_session(device, opts)
        with pytest.raises(popart.popart_exception) as error:
            session.getCycleCount()
        assert error.value.args[0].startswith("Must call run before getCycleCount")
        _run(session, d0)
        assert session.getCycleCount() > 0


@pytest.mark.follows("test_get_cycle_count_requires_instrumentation_option")
def test_get_cycle_count_requires_instrumentation_option():
    with _device() as device:
        session, d0 = _exp_session(device)
        _run(session, d0)
        with pytest.raises(popart.popart_exception) as error:
            session.getCycleCount()
        assert error.value.args[0].startswith(
            "SessionOption 'instrumentWithHardwareCycleCounter' must be"
        )


def _instrumented(instrumentations):
    opts = popart.SessionOptions()
    opts.instrumentWithHardwareCycleCounter = True
    opts.hardwareInstrumentations = instrumentations
    return opts


@pytest.mark.follows("test_get_cycle_count_bad_id")
def test_get_cycle_count_bad_id():
    with _device() as device:
        session, d0 = _exp_session(device, _instrumented({popart.Instrumentation.Outer}))
        _run(session, d0)
        with pytest.raises(popart.popart_exception) as error:
            session.getCycleCount("inner_ipu_0")
        assert error.value.args[0].endswith(
            "Make sure you have set SessionOption::hardwareInstrumentations correctly."
        )
    with _device() as device:
        session, d0 = _exp_session(device, _instrumented({popart.Instrumentation.Inner}))
        _run(session, d0)
        assert session.getCycleCount("inner_ipu_0") > 0
        # Without the outer instrumentation there is no whole-program counter.
        with pytest.raises(popart.popart_exception, match="Invalid id for cycle counter, ''"):
            session.getCycleCount()


@pytest.mark.follows("test_get_cycle_count_replication")
@pytest.mark.parametrize("use_io_tiles", [True, False])
def test_get_cycle_count_replication(use_io_tiles):
    builder = popart.Builder()
    d0 = builder.addInputTensor("FLOAT", [1])
    with builder.virtualGraph(0):
        act = builder.aiOnnx.exp([d0])
    with builder.virtualGraph(1):
        act = builder.aiOnnx.sin([act])
    opts = _instrumented({popart.Instrumentation.Outer, popart.Instrumentation.Inner})
    opts.replicatedGraphCount = 2
    opts.virtualGraphMode = popart.VirtualGraphMode.Manual
    opts.enableReplicatedGraphs = True
    tiles = 4
    if use_io_tiles:
        opts.numIOTiles = 32
        tiles = 1472  # the original's USE_ALL_TILES: IO tiles need more than 4 tiles
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 4, "tilesPerIPU": tiles})
    with device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(20, [act]),
            userOptions=opts,
            deviceInfo=device,
        )
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        data = np.random.rand(20, 2, 1).astype(np.float32)
        session.run(popart.PyStepIO({d0: data}, anchors))
        np.testing.assert_allclose(anchors[act], np.sin(np.exp(data)), rtol=1e-6)
        outer = session.getCycleCount()
        inner = [session.getCycleCount(f"inner_ipu_{i}") for i in range(2)]
        # Two IPUs per replica; the inner counters time one of the 20 batches.
        assert 0 < inner[0] == inner[1] < outer
        with pytest.raises(popart.popart_exception, match="Invalid id"):
            session.getCycleCount("inner_ipu_2")
