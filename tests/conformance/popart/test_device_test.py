"""graphcore/popart tests/integration/device_test.py: enumerating devices by type and size,
acquiring IPUs by id and by count (with the original's errors for an unknown id, a busy
device and too many IPUs; `tryAcquireDeviceById` giving None), connection types and the
attached state, IPU Model and simulator defaults, and prepareDevice's INFO log ("Graph
compiled", "Engine loaded" now or at the first run when loadEngine is False). The original
runs them on IPU hardware; here on the emulated machine's IPUs."""

import itertools

import numpy as np
import pytest

import popart


@pytest.fixture
def info_log():
    logger = popart.getLogger()
    previous = logger._logger.level  # noqa: SLF001 - restored for the tests that follow
    logger.setLevel("INFO")
    yield
    logger._logger.setLevel(previous)  # noqa: SLF001


@pytest.mark.follows("test_enum_specfic_devices")
def test_enum_specfic_devices():
    manager = popart.DeviceManager()
    kinds = [popart.DeviceType.IpuModel, popart.DeviceType.Cpu, popart.DeviceType.Ipu]
    for count, kind in itertools.product([1, 2, 4, 8, 16], kinds):
        devices = manager.enumerateDevices(
            pattern=popart.SyncPattern.Full, numIpus=count, deviceType=kind
        )
        for device in devices:
            assert device.numIpus == count
            assert isinstance(device.type, type(kind))


@pytest.mark.follows("test_aquire_device_by_id_0")
def test_aquire_device_by_id_0():
    manager = popart.DeviceManager()
    for device_id in range(len(manager.enumerateDevices(numIpus=1))):
        device = manager.acquireDeviceById(id=device_id, pattern=popart.SyncPattern.Full)
        assert device.id == device_id
        device.detach()


@pytest.mark.follows("test_aquire_device_by_id_1")
def test_aquire_device_by_id_1():
    with pytest.raises(popart.poplar_exception, match="No such device set id: '999'"):
        popart.DeviceManager().acquireDeviceById(999)


@pytest.mark.follows("test_aquire_device_by_id_2")
def test_aquire_device_by_id_2():
    manager = popart.DeviceManager()
    with manager.acquireDeviceById(0):
        with pytest.raises(popart.popart_exception, match="Failed to acquire device with id '0'"):
            manager.acquireDeviceById(0)


@pytest.mark.follows("test_aquire_device_by_id_3")
def test_aquire_device_by_id_3():
    manager = popart.DeviceManager()
    device = manager.acquireDeviceById(0)
    assert device is not None
    assert manager.tryAcquireDeviceById(0) is None
    device.detach()


@pytest.mark.follows("test_default_connection_type_0")
def test_default_connection_type_0():
    device = popart.DeviceManager().acquireAvailableDevice(1)
    assert device.connectionType == popart.DeviceConnectionType.Always
    device.detach()


@pytest.mark.follows("test_default_connection_type_1")
def test_default_connection_type_1():
    with pytest.raises(
        popart.popart_exception,
        match="Failed to acquire device with 256 IPUs. Ensure that there are sufficient IPUs "
        "available",
    ):
        popart.DeviceManager().acquireAvailableDevice(256)


@pytest.mark.follows("test_default_connection_type_2")
def test_default_connection_type_2():
    manager = popart.DeviceManager()
    with manager.acquireAvailableDevice(len(manager.enumerateDevices())):
        with pytest.raises(
            popart.popart_exception,
            match="Failed to acquire device with 1 IPUs. Ensure that there are sufficient IPUs "
            "available",
        ):
            manager.acquireAvailableDevice(1)


@pytest.mark.follows("test_on_demand_connection_type")
def test_on_demand_connection_type():
    device = popart.DeviceManager().acquireAvailableDevice(
        1, connectionType=popart.DeviceConnectionType.OnDemand
    )
    assert device.connectionType == popart.DeviceConnectionType.OnDemand


@pytest.mark.follows("test_attached_state")
def test_attached_state():
    manager = popart.DeviceManager()
    manager.setOnDemandAttachTimeout(1)
    device = manager.acquireAvailableDevice(1, connectionType=popart.DeviceConnectionType.OnDemand)
    assert not device.isAttached
    device.attach()
    assert device.isAttached
    device.detach()
    assert not device.isAttached
    device.tryAttachUntilTimeout()
    assert device.isAttached
    device.detach()
    assert not device.isAttached


@pytest.mark.follows("test_set_and_get_ipu_model_version")
def test_set_and_get_ipu_model_version():
    device = popart.DeviceManager().createIpuModelDevice({"ipuVersion": "ipu2"})
    assert device.version == "ipu2"


@pytest.mark.follows("test_check_default_ipu_model_0")
def test_check_default_ipu_model_0():
    assert popart.DeviceManager().createIpuModelDevice({}).version == "ipu2"


def _log_says(capfd, compiled, loaded):
    lines = capfd.readouterr().err.splitlines()
    assert any("Graph compiled" in line for line in lines) == compiled
    assert any("Engine loaded" in line for line in lines) == loaded


def _prepare(session, load_engine):
    if load_engine is None:
        session.prepareDevice()  # loads the engine by default
        return True
    session.prepareDevice(load_engine)
    return load_engine


@pytest.mark.follows("test_prepareDevice_inference")
@pytest.mark.parametrize("load_engine", [True, False, None])
def test_prepareDevice_inference(load_engine, capfd, info_log):
    builder = popart.Builder()
    info = popart.TensorInfo("FLOAT", [3])
    a, b = builder.addInputTensor(info), builder.addInputTensor(info)
    o = builder.aiOnnx.add([a, b])
    builder.addOutputTensor(o)
    with popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": 4}) as device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(2, {o: popart.AnchorReturnType("All")}),
            userOptions=popart.SessionOptions(),
            deviceInfo=device,
        )
        with pytest.raises(popart.popart_exception, match="no compiled engine"):
            session.loadEngineAndConnectStreams()
        loaded = _prepare(session, load_engine)
        _log_says(capfd, compiled=True, loaded=loaded)
        anchors = session.initAnchorArrays()
        rng = np.random.default_rng(0)
        data_a, data_b = rng.random((2, 3), np.float32), rng.random((2, 3), np.float32)
        session.run(popart.PyStepIO({a: data_a, b: data_b}, anchors))
        _log_says(capfd, compiled=False, loaded=not loaded)
    np.testing.assert_allclose(anchors[o], data_a + data_b)


@pytest.mark.follows("test_prepareDevice_training")
@pytest.mark.parametrize("load_engine", [True, False, None])
def test_prepareDevice_training(load_engine, capfd, info_log):
    builder = popart.Builder()
    data = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 2, 2]), "data")
    kernel = builder.addInitializedInputTensor(
        np.array([1.0, 2.0, 1.0, 2.0], np.float32).reshape(1, 1, 2, 2), "filter"
    )
    conv = builder.aiOnnx.conv([data, kernel], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[2, 2])
    loss = builder.aiGraphcore.l1loss([conv], 0.1, reduction=popart.ReductionType.Sum)
    opts = popart.SessionOptions()
    opts.enableOutlining = False
    opts.enableOutliningCopyCostPruning = False
    with popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": 4}) as device:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {conv: popart.AnchorReturnType("All")}),
            userOptions=opts,
            optimizer=popart.ConstSGD(0.1),
            loss=loss,
            deviceInfo=device,
        )
        loaded = _prepare(session, load_engine)
        _log_says(capfd, compiled=True, loaded=loaded)
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        x = np.arange(1.0, 5.0, dtype=np.float32).reshape(1, 1, 2, 2)
        session.run(popart.PyStepIO({data: x}, anchors))
    _log_says(capfd, compiled=False, loaded=not loaded)
    # Padded by one, stride 2: each 2x2 window of the padded input holds one input value.
    padded = np.pad(x[0, 0], 1)
    k = np.array([[1.0, 2.0], [1.0, 2.0]])
    expected = [[(padded[i : i + 2, j : j + 2] * k).sum() for j in (0, 2)] for i in (0, 2)]
    np.testing.assert_allclose(anchors[conv][0, 0], expected)


@pytest.mark.follows("test_create_sim_device")
def test_create_sim_device():
    device = popart.DeviceManager().createSimDevice({"numIPUs": 2, "tilesPerIPU": 8})
    assert (device.numIpus, device.tilesPerIPU) == (2, 8)


@pytest.mark.follows("test_create_sim_default_device")
def test_create_sim_default_device():
    device = popart.DeviceManager().createSimDevice({})
    assert (device.numIpus, device.tilesPerIPU) == (1, 4)
