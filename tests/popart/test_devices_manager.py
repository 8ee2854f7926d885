"""DeviceManager and DeviceInfo on the emulated machine (16 IPUs unless OPENIPU_NUM_IPUS)."""

from __future__ import annotations

import numpy as np
import pytest

import popart
from openipu._src.popart.devices import ipu_pool
from openipu._src.system import topology

ALWAYS = popart.DeviceConnectionType.Always
ON_DEMAND = popart.DeviceConnectionType.OnDemand


@pytest.fixture
def manager():
    manager = popart.DeviceManager()
    yield manager
    manager.setOnDemandAttachTimeout(0)


@pytest.fixture(autouse=True)
def nothing_attached():
    assert not ipu_pool.attached_ipus(), "a previous test left IPUs attached"
    yield
    leftover = ipu_pool.attached_ipus()
    for ipu in leftover:  # keep the next test independent, but report the leak
        ipu_pool._owners.pop(ipu, None)  # noqa: SLF001
    assert not leftover, f"IPUs {sorted(leftover)} are still attached"


def test_device_manager_is_one_shared_object(manager):
    assert popart.DeviceManager() is manager


def test_acquire_attaches_and_detach_releases(manager):
    device = manager.acquireAvailableDevice(2)
    assert device.isAttached and device.type is popart.DeviceType.Ipu
    assert device.numIpus == 2 and device.driverIds == [0, 1] and device.id == 16
    assert device.tilesPerIPU == device.tilesPerIpu == 1472
    assert device.version == device.ipuVersion == "ipu2" and device.numWorkerContexts == 6
    assert device.connectionType is ALWAYS
    second = manager.acquireAvailableDevice(2)
    assert second.driverIds == [2, 3]  # the first pair is taken
    device.detach()
    assert not device.isAttached
    third = manager.acquireAvailableDevice(2)
    assert third.driverIds == [0, 1]
    second.detach()
    third.detach()


def test_device_info_is_a_context_manager(manager):
    with manager.acquireAvailableDevice(1) as device:
        assert device.isAttached
    assert not device.isAttached


def test_too_many_ipus_and_non_powers_of_two(manager):
    total = topology.num_emulated_ipus()
    with pytest.raises(
        popart.popart_exception,
        match=f"{2 * total} IPUs. Ensure .*: the emulated machine has {total}",
    ):
        manager.acquireAvailableDevice(2 * total)
    # The original's try variant refuses a count that is not a power of two too: it is a
    # mistake, not an unavailable device.
    for acquire in (manager.acquireAvailableDevice, manager.tryAcquireAvailableDevice):
        with pytest.raises(popart.popart_exception, match="3 IPUs.*must be a power of two"):
            acquire(3)
    assert manager.tryAcquireAvailableDevice(2 * total) is None


def test_hardware_devices_are_not_acquired_with_a_never_connection(manager):
    never = popart.DeviceConnectionType.Never
    for acquire in (manager.acquireAvailableDevice, manager.tryAcquireAvailableDevice):
        with pytest.raises(popart.popart_exception, match="createOfflineIPUDevice"):
            acquire(1, connectionType=never)
    for acquire in (manager.acquireDeviceById, manager.tryAcquireDeviceById):
        with pytest.raises(popart.popart_exception, match="createOfflineIPUDevice"):
            acquire(0, connectionType=never)
    # Enumerating them is how a program gets hardware devices that never attach.
    (device,) = manager.enumerateDevices(numIpus=topology.num_emulated_ipus(), connectionType=never)
    assert device.connectionType is never and not device.isAttached


def test_acquire_fails_when_the_machine_is_full(manager):
    total = topology.num_emulated_ipus()
    with manager.acquireAvailableDevice(total):
        with pytest.raises(popart.popart_exception, match="no free device of that size"):
            manager.acquireAvailableDevice(1)
        assert manager.tryAcquireAvailableDevice(1) is None
        assert manager.tryAcquireDeviceById(0) is None
    assert manager.tryAcquireAvailableDevice(1) is not None


def test_acquire_by_id_follows_the_device_listing(manager):
    total = topology.num_emulated_ipus()
    with manager.acquireDeviceById(total + 1) as pair:  # the second two-IPU device
        assert pair.driverIds == [2, 3] and pair.id == total + 1
        with pytest.raises(
            popart.popart_exception,
            match=r"id '3'. Ensure it is available: its IPUs \[3\] are attached",
        ):
            manager.acquireDeviceById(3)
    last = len(topology.device_listing()) - 1
    with pytest.raises(popart.poplar_exception, match=f"device ids 0 to {last}"):
        manager.acquireDeviceById(last + 1)
    assert manager.tryAcquireDeviceById(last + 1) is None


def test_on_demand_devices_attach_when_a_session_needs_them(manager, small_model):
    device = manager.acquireAvailableDevice(1, connectionType=ON_DEMAND)
    assert not device.isAttached
    session = popart.InferenceSession(
        small_model.proto, popart.DataFlow(1, [small_model.y]), device
    )
    session.prepareDevice()
    assert device.isAttached
    device.detach()


def test_on_demand_attach_times_out(manager, small_model):
    device = manager.acquireAvailableDevice(1, connectionType=ON_DEMAND)
    with manager.acquireDeviceById(device.id):
        session = popart.InferenceSession(
            small_model.proto, popart.DataFlow(1, [small_model.y]), device
        )
        with pytest.raises(popart.popart_exception, match="Could not attach to device"):
            session.prepareDevice()
    manager.setOnDemandAttachTimeout(1)
    with pytest.raises(TypeError, match="attachTimeout must be int"):
        manager.setOnDemandAttachTimeout(1.5)
    with pytest.raises(TypeError, match=">= 0 seconds"):  # an unsigned parameter
        manager.setOnDemandAttachTimeout(-1)


def test_selection_criterion_random_still_gives_a_free_device(manager):
    with manager.acquireAvailableDevice(
        4, selectionCriterion=popart.DeviceSelectionCriterion.Random
    ) as device:
        assert device.numIpus == 4 and device.driverIds[0] % 4 == 0


def test_virtual_devices_with_fewer_tiles(manager):
    with manager.acquireAvailableDevice(1, tilesPerIpu=64) as device:
        assert device.tilesPerIPU == 64
    with pytest.raises(popart.popart_exception, match="has 1472 tiles"):
        manager.acquireAvailableDevice(1, tilesPerIpu=5000)


def test_enumerate_devices(manager):
    total = topology.num_emulated_ipus()
    pairs = manager.enumerateDevices(numIpus=2)
    assert len(pairs) == total // 2 and all(d.numIpus == 2 for d in pairs)
    assert not any(d.isAttached for d in pairs)
    assert manager.enumerateDevices(deviceType=popart.DeviceType.IpuModel) == []
    assert manager.enumerateDevices(numIpus=3) == []


def test_ipu_model_cpu_and_offline_devices(manager):
    model = manager.createIpuModelDevice({"numIPUs": 2, "tilesPerIPU": "8", "ipuVersion": "ipu21"})
    assert (model.type, model.numIpus, model.tilesPerIPU, model.version) == (
        popart.DeviceType.IpuModel, 2, 8, "ipu21",
    )  # fmt: skip
    assert manager.createIpuModelDevice({}).tilesPerIPU == 4  # the documented default
    assert model.attach() and model.isAttached
    cpu = manager.createCpuDevice()
    assert cpu.type is popart.DeviceType.Cpu and cpu.numIpus == 1
    offline = manager.createOfflineIPUDevice({"numIPUs": 4, "syncPattern": "singlePipeline"})
    assert offline.type is popart.DeviceType.OfflineIpu and offline.numIpus == 4
    assert offline.tilesPerIPU == 1472 and not offline.attach()
    assert manager.createSimDevice({}).type is popart.DeviceType.Sim
    copy = manager.createOfflineIpuFromDeviceInfo(model)
    assert (copy.type, copy.numIpus, copy.tilesPerIPU) == (popart.DeviceType.OfflineIpu, 2, 8)
    pod = manager.createOfflineIpuFromSystemString("POD16", 0)
    assert pod.numIpus == 16 and pod.tilesPerIPU == 1472
    assert "ipu-model" in str(model) and "NumIPUs:2" in str(model)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"numIpus": 2}, "Invalid option 'numIpus'"),
        ({"numIPUs": 0}, "'numIPUs' must be a positive integer"),
        ({"tilesPerIPU": "many"}, "'tilesPerIPU' must be a positive integer"),
        ({"ipuVersion": "ipu9"}, "'ipuVersion' is 'ipu9'"),
    ],
)
def test_ipu_model_options_are_checked(manager, options, message):
    with pytest.raises(popart.popart_exception, match=message):
        manager.createIpuModelDevice(options)


def test_argument_types_are_checked(manager):
    # The original's bindings (popart.cpp) refuse these as pybind11 does.
    with pytest.raises(TypeError, match=r"^acquireAvailableDevice\(\): incompatible function"):
        manager.acquireAvailableDevice("1")
    with pytest.raises(TypeError, match=r"^acquireAvailableDevice\(\): incompatible function"):
        manager.acquireAvailableDevice(1, connectionType="Always")
    with pytest.raises(TypeError, match=r"^createIpuModelDevice\(\): incompatible function"):
        manager.createIpuModelDevice([("numIPUs", 1)])


def test_sessions_run_on_the_host_device_of_their_first_ipu(manager, small_model):
    with manager.acquireDeviceById(3) as device:
        assert device.host_device() == f"/device:CPU:{3 % len(_cpus())}"
        session = popart.InferenceSession(
            small_model.proto, popart.DataFlow(1, [small_model.y]), device
        )
        session.prepareDevice()
        arrays = session.initAnchorArrays()
        session.run(popart.PyStepIO({small_model.x: np.ones((2, 4), np.float32)}, arrays))
        assert session._weights.device[small_model.w].device.endswith(
            device.host_device()[len("/device:") :]
        )


def test_sessions_need_no_configured_tensorflow_ipu_system(manager, small_model):
    from openipu._src.system import configure

    assert configure.maybe_current_system() is None
    session = popart.InferenceSession(
        small_model.proto, popart.DataFlow(1, [small_model.y]), manager.createCpuDevice()
    )
    session.prepareDevice()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO({small_model.x: np.ones((2, 4), np.float32)}, arrays))


def test_device_manager_can_be_patched(monkeypatch, small_model):
    calls = []
    original = popart.DeviceManager.acquireAvailableDevice

    def spy(self, *args, **kwargs):
        calls.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(popart.DeviceManager, "acquireAvailableDevice", spy)
    with popart.DeviceManager().acquireAvailableDevice(1):
        pass
    assert calls == [(1,)]


def _cpus():
    import tensorflow as tf

    return tf.config.list_logical_devices("CPU")


def test_a_subclass_may_retry_with_the_try_variant():
    """A common wrapper: acquireAvailableDevice overridden to poll tryAcquireAvailableDevice."""

    class RetryingManager(popart.DeviceManager):
        def acquireAvailableDevice(self, numIpus=1, *args, **kwargs):  # noqa: N802, N803
            for _ in range(3):
                device = self.tryAcquireAvailableDevice(numIpus, *args, **kwargs)
                if device is not None:
                    return device
            raise RuntimeError(f"no device with {numIpus} IPUs after 3 tries")

        def acquireDeviceById(self, id, *args, **kwargs):  # noqa: N802, A002
            device = self.tryAcquireDeviceById(id, *args, **kwargs)
            if device is None:
                raise RuntimeError(f"device {id} is busy")
            return device

    manager = RetryingManager()
    total = topology.num_emulated_ipus()
    with manager.acquireAvailableDevice(2) as pair:
        assert pair.numIpus == 2 and pair.isAttached
        with manager.acquireDeviceById(total + 1) as second_pair:  # ids: 1-IPU devices first
            assert second_pair.driverIds == [2, 3]
        with pytest.raises(RuntimeError, match="device 0 is busy"):
            manager.acquireDeviceById(0)
    with manager.acquireAvailableDevice(total):
        with pytest.raises(RuntimeError, match="after 3 tries"):
            manager.acquireAvailableDevice(1)


def test_a_monkeypatch_may_fall_back_on_the_original_method(monkeypatch):
    """A patched tryAcquireAvailableDevice that calls the original acquireAvailableDevice,
    and a patched acquireAvailableDevice that calls the original try variant."""
    original_acquire = popart.DeviceManager.acquireAvailableDevice
    original_try = popart.DeviceManager.tryAcquireAvailableDevice

    def try_via_acquire(self, *args, **kwargs):
        try:
            return original_acquire(self, *args, **kwargs)
        except popart.popart_exception:
            return None

    def acquire_via_try(self, *args, **kwargs):
        device = original_try(self, *args, **kwargs)
        assert device is not None
        return device

    monkeypatch.setattr(popart.DeviceManager, "tryAcquireAvailableDevice", try_via_acquire)
    monkeypatch.setattr(popart.DeviceManager, "acquireAvailableDevice", acquire_via_try)
    manager = popart.DeviceManager()
    with manager.acquireAvailableDevice(4) as device:
        assert device.driverIds == [0, 1, 2, 3]
        assert manager.tryAcquireAvailableDevice(topology.num_emulated_ipus()) is None
