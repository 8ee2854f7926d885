"""Configuring the emulated IPU system (spec 21.7 functions, E11, E12)."""

from __future__ import annotations

import pytest
import tensorflow as tf

from openipu._src.config.enums import DeviceConnectionType
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.system import configure, topology


@pytest.fixture(autouse=True)
def _reset():
    configure.reset_ipu_configuration()
    yield
    configure.reset_ipu_configuration()


def _configure(**options):
    config = IPUConfig()
    for name, value in options.items():
        setattr(config, name, value)
    configure.configure_ipu_system(config)
    return configure.current_system()


def test_auto_select_int_makes_one_device():
    system = _configure(auto_select_ipus=4)
    assert [(d.name, d.ipus) for d in system.devices] == [("/device:IPU:0", (0, 1, 2, 3))]


def test_auto_select_list_makes_one_device_per_entry_on_disjoint_aligned_ipus():
    system = _configure(auto_select_ipus=[1, 2, 4])
    assert [d.ipus for d in system.devices] == [(0,), (2, 3), (4, 5, 6, 7)]
    assert [d.name for d in system.devices] == ["/device:IPU:0", "/device:IPU:1", "/device:IPU:2"]


def test_asking_for_more_ipus_than_the_machine_has_names_the_numbers():
    with pytest.raises(
        tf.errors.InternalError,
        match=r"Could not find an available device .*/device:IPU:1.* asks for 32 IPUs and the emulated machine has 16",
    ):
        _configure(auto_select_ipus=[16, 16])


def test_multi_ipu_device_size_must_be_a_power_of_two():
    with pytest.raises(
        tf.errors.FailedPreconditionError,
        match=r"Unsupported number of IPUs requested - could not find an IPU device with 3 IPUs"
        r".*power-of-two",
    ):
        _configure(auto_select_ipus=3)


def test_select_ipus_uses_the_device_listing():
    listing = topology.device_listing(16)
    assert [e.num_ipus for e in listing].count(1) == 16
    assert listing[16].ipus == (0, 1) and listing[24].ipus == (0, 1, 2, 3)
    assert listing[30].ipus == tuple(range(16)) and len(listing) == 31
    system = _configure(select_ipus=[24, 25])
    assert [d.ipus for d in system.devices] == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_select_ipus_rejects_an_unknown_id_and_overlaps():
    with pytest.raises(ValueError, match=r"select_ipus entry 0 is 31: .* device ids 0 to 30"):
        _configure(select_ipus=31)
    with pytest.raises(ValueError, match=r"device ids 0 and 16 both contain IPU 0"):
        _configure(select_ipus=[0, 16])


def test_reconfiguring_replaces_the_devices():
    _configure(auto_select_ipus=1)
    system = _configure(auto_select_ipus=[2, 2])
    assert len(system.devices) == 2


def test_get_ipu_config_before_configuration_raises():
    with pytest.raises(RuntimeError, match="No IPU devices configured."):
        configure.get_ipu_config()


def _auto_counts(options) -> list[int]:
    return [device.auto_count for device in options.device_config]


def test_get_ipu_config_returns_one_protobuf_per_device_and_copies():
    _configure(auto_select_ipus=[1, 1])
    configs = configure.get_ipu_config()
    assert len(configs) == 2 and all(_auto_counts(c) == [1, 1] for c in configs)
    configs[0].device_config[0].auto_count = 4
    assert _auto_counts(configure.get_ipu_config()[0]) == [1, 1]


def test_get_ipu_config_without_device_selection_raises_as_the_original():
    # The original's get_ipu_config counts a configuration without device_config as none
    # (its config.py), though the backend still creates one single-IPU device.
    system = _configure()
    assert len(system.devices) == 1
    with pytest.raises(RuntimeError, match="No IPU devices configured."):
        configure.get_ipu_config()
    (options,) = configure.configured_ipu_options()
    assert len(options.device_config) == 0 and options.creator_id == 1


def test_configure_needs_an_ipu_config():
    with pytest.raises(TypeError, match="needs an IPUConfig or an IpuOptions protobuf, got dict"):
        configure.configure_ipu_system({"auto_select_ipus": 1})


def test_config_method_configures():
    config = IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    assert configure.current_system().devices[0].num_ipus == 2


def test_reset_forgets_the_system():
    _configure(auto_select_ipus=1)
    configure.reset_ipu_configuration()
    with pytest.raises(
        tf.errors.FailedPreconditionError, match="No device target has been configured"
    ):
        configure.current_system()


def test_invalid_configuration_is_refused_at_configure_time():
    config = IPUConfig()
    config.device_connection.type = DeviceConnectionType.PRE_COMPILE
    with pytest.raises(ValueError, match="version"):
        configure.configure_ipu_system(config)


def test_machine_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(topology.NUM_IPUS_ENV, "64")
    assert topology.num_emulated_ipus() == 64
    assert len(topology.device_listing()) == 127
    monkeypatch.setenv(topology.NUM_IPUS_ENV, "12")
    with pytest.raises(ValueError, match="must be a power of two"):
        topology.num_emulated_ipus()
    monkeypatch.setenv(topology.NUM_IPUS_ENV, "many")
    with pytest.raises(ValueError, match="not an integer"):
        topology.num_emulated_ipus()


def test_ipu_devices_are_separate_host_devices():
    system = _configure(auto_select_ipus=[1, 1, 2])
    hosts = {system.device(0).host_device(), system.device(1).host_device()}
    hosts |= {system.device(2).host_device(0), system.device(2).host_device(1)}
    assert len(hosts) == 4
    assert len(tf.config.list_logical_devices("CPU")) >= topology.num_emulated_ipus()


def test_device_lookup_names_the_valid_range():
    system = _configure(auto_select_ipus=1)
    with pytest.raises(
        tf.errors.InternalError,
        match=r"Device ordinal 3 not in device configuration list.* has 1 IPU device",
    ):
        system.device(3)


@pytest.mark.parametrize(
    "name, ordinal",
    [
        ("/device:IPU:0", 0),
        ("/device:IPU:12", 12),
        ("/job:localhost/replica:0/task:0/device:IPU:1", 1),
        ("/device:CPU:0", None),
        ("IPU:0", None),
    ],
)
def test_ipu_ordinal_parsing(name, ordinal):
    assert configure.ipu_ordinal(name) == ordinal


def test_ipu_get_configuration_op_serializes_the_options_of_each_device():
    from tensorflow.compiler.plugin.poplar.driver.config_pb2 import IpuOptions
    from tensorflow.compiler.plugin.poplar.ops import gen_ipu_ops

    assert gen_ipu_ops.ipu_get_configuration().numpy().tolist() == []
    _configure(auto_select_ipus=[1, 2])
    serialized = gen_ipu_ops.ipu_get_configuration().numpy()
    parsed = [IpuOptions.FromString(entry) for entry in serialized]
    assert parsed == configure.get_ipu_config()
    assert [_auto_counts(options) for options in parsed] == [[1, 2], [1, 2]]


def test_configuring_again_without_reset_compares_the_protobufs():
    _configure(auto_select_ipus=2)
    same = IPUConfig()
    same.auto_select_ipus = [2]  # Another spelling of the same IpuOptions.
    configure.configure_ipu_system(same, reset_configuration=False)
    other = IPUConfig()
    other.auto_select_ipus = [2]
    other.allow_recompute = True
    with pytest.raises(tf.errors.FailedPreconditionError, match="already configured"):
        configure.configure_ipu_system(other, reset_configuration=False)
