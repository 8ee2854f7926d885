"""IPUConfig.validate(): the rules that involve several options (E15-E18 and IPU selection)."""

import warnings

import pytest

from openipu._src.config import DeviceConnectionType, IPUConfig


def validation_message(config):
    with pytest.raises(ValueError) as error:
        config.validate()
    return str(error.value)


def test_default_config_is_valid():
    IPUConfig().validate()


@pytest.mark.parametrize(
    "change",
    [
        lambda c: setattr(c, "auto_select_ipus", 1),
        lambda c: setattr(c, "auto_select_ipus", [2, 2]),
        lambda c: setattr(c, "auto_select_ipus", (1, 2)),
        lambda c: setattr(c, "select_ipus", 0),
        lambda c: setattr(c, "select_ipus", [24, 25]),
        lambda c: setattr(c.device_connection, "type", DeviceConnectionType.ON_DEMAND),
        lambda c: setattr(c.io_tiles, "num_io_tiles", 32),
        lambda c: setattr(c.norms.experimental, "distributed_batch_norm_replica_group_size", 4),
    ],
)
def test_valid_configs(change):
    config = IPUConfig()
    change(config)
    config.validate()


@pytest.mark.parametrize("version", ["ipu1", "ipu2", "ipu21"])
@pytest.mark.parametrize(
    "connection", [DeviceConnectionType.PRE_COMPILE, DeviceConnectionType.NEVER]
)
def test_offline_connection_with_a_version_is_valid(connection, version):
    config = IPUConfig()
    config.device_connection.type = connection
    config.device_connection.version = version
    config.validate()


@pytest.mark.parametrize("version", ["ipu3", "IPU2", "ipu 2", "mk2"])
def test_e15_unknown_device_connection_version(version):
    config = IPUConfig()
    config.device_connection.type = DeviceConnectionType.PRE_COMPILE
    config.device_connection.version = version
    message = validation_message(config)
    assert "device_connection.version" in message
    assert repr(version) in message
    for allowed in ('"ipu1"', '"ipu2"', '"ipu21"', '""'):
        assert allowed in message


@pytest.mark.parametrize(
    "connection", [DeviceConnectionType.PRE_COMPILE, DeviceConnectionType.NEVER]
)
def test_e15_offline_connection_needs_a_version(connection):
    config = IPUConfig()
    config.device_connection.type = connection
    message = validation_message(config)
    assert "device_connection.version" in message
    assert connection.name in message
    assert "ipu21" in message


def test_e15_version_with_an_attached_connection_is_ignored_with_a_warning():
    config = IPUConfig()
    config.device_connection.version = "ipu2"
    with pytest.warns(UserWarning, match="device_connection.version"):
        config.validate()


def test_default_config_validates_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        IPUConfig().validate()


@pytest.mark.parametrize(("count", "index"), [(2, 2), (2, -1), (1, 5), (4, 4)])
def test_e16_process_index_out_of_range(count, index):
    config = IPUConfig()
    distribution = config.experimental.multi_replica_distribution
    distribution.process_count = count
    distribution.process_index = index
    message = validation_message(config)
    assert "experimental.multi_replica_distribution.process_index" in message
    assert f"is {index}" in message
    assert f"[0, {count})" in message


@pytest.mark.parametrize(("count", "index"), [(2, 0), (2, 1), (8, 7), (0, 0), (0, 3)])
def test_e16_valid_process_index(count, index):
    config = IPUConfig()
    config.experimental.multi_replica_distribution.process_count = count
    config.experimental.multi_replica_distribution.process_index = index
    config.validate()


def test_e16_negative_process_count():
    config = IPUConfig()
    config.experimental.multi_replica_distribution.process_count = -1
    with pytest.raises(ValueError, match="process_count is -1, but must be >= 0"):
        config.validate()


def test_e17_place_ops_on_io_tiles_needs_io_tiles():
    config = IPUConfig()
    config.io_tiles.place_ops_on_io_tiles = True
    message = validation_message(config)
    assert "io_tiles.place_ops_on_io_tiles" in message
    assert "io_tiles.num_io_tiles" in message
    config.io_tiles.num_io_tiles = 32
    config.validate()


def test_negative_num_io_tiles():
    config = IPUConfig()
    config.io_tiles.num_io_tiles = -4
    with pytest.raises(ValueError, match="io_tiles.num_io_tiles is -4, but must be >= 0"):
        config.validate()


@pytest.mark.parametrize("group_size", [0, -1])
def test_e18_replica_group_size_below_one(group_size):
    config = IPUConfig()
    config.norms.experimental.distributed_batch_norm_replica_group_size = group_size
    message = validation_message(config)
    assert "norms.experimental.distributed_batch_norm_replica_group_size" in message
    assert f"is {group_size}" in message
    assert "must be at least 1" in message


def test_e18_distributed_batch_norm_with_io_tiles():
    config = IPUConfig()
    config.norms.experimental.distributed_batch_norm_replica_group_size = 2
    config.io_tiles.num_io_tiles = 16
    message = validation_message(config)
    assert "distributed_batch_norm_replica_group_size is not supported with I/O tiles" in message
    assert "It is 2" in message
    assert "io_tiles.num_io_tiles is 16" in message


@pytest.mark.parametrize(("auto", "select"), [(1, 0), ([2, 2], [24]), (2, [0, 1])])
def test_auto_select_and_select_both_set(auto, select):
    config = IPUConfig()
    config.auto_select_ipus = auto
    config.select_ipus = select
    message = validation_message(config)
    assert f"auto_select_ipus is {auto!r}" in message
    assert f"select_ipus is {select!r}" in message


@pytest.mark.parametrize(
    ("select", "repeated"), [([0, 0], "0"), ([1, 2, 1, 2], "1, 2"), ((3, 4, 3), "3")]
)
def test_duplicate_select_ipus(select, repeated):
    config = IPUConfig()
    config.select_ipus = select
    message = validation_message(config)
    assert f"select_ipus is {select!r}" in message
    assert f"repeated: {repeated}" in message


@pytest.mark.parametrize("select", [-1, [0, -3]])
def test_negative_select_ipus(select):
    config = IPUConfig()
    config.select_ipus = select
    with pytest.raises(ValueError, match="select_ipus is .*, but device configuration indices"):
        config.validate()


@pytest.mark.parametrize(
    ("auto", "bad"), [(0, "0"), (-2, "-2"), ([2, 0], "0"), ((1, -1, 0), "-1, 0")]
)
def test_auto_select_ipus_counts_must_be_positive(auto, bad):
    config = IPUConfig()
    config.auto_select_ipus = auto
    message = validation_message(config)
    assert f"auto_select_ipus is {auto!r}" in message
    assert ">= 1" in message
    assert f"(got {bad})" in message


def test_every_problem_is_reported_at_once():
    config = IPUConfig()
    config.io_tiles.place_ops_on_io_tiles = True
    config.select_ipus = [1, 1]
    config.device_connection.type = DeviceConnectionType.NEVER
    with pytest.raises(ValueError, match="3 problems") as error:
        config.validate()
    message = str(error.value)
    assert "place_ops_on_io_tiles" in message
    assert "repeated: 1" in message
    assert "device_connection.version" in message


# -- values the original does not check ---------------------------------------------------
# tensorflow/python/ipu/config.py checks only the types of these options when they are set,
# and its backend takes them as they are: a proportion is not range-checked, a tiles_per_ipu
# <= 0 means the standard number, and the ipu_model category is read only on the IPU model.


@pytest.mark.parametrize(
    "change",
    [
        lambda c: setattr(c.io_tiles, "available_memory_proportion", 1.5),
        lambda c: setattr(c.io_tiles, "available_memory_proportion", float("nan")),
        lambda c: setattr(c.io_tiles, "available_memory_proportion", -0.5),
        lambda c: setattr(c.ipu_model, "tiles_per_ipu", -1),
        lambda c: setattr(c.ipu_model, "version", "ipu9"),
        lambda c: setattr(c.ipu_model, "version", ""),
    ],
)
def test_values_the_original_takes_unchecked_configure(change, monkeypatch):
    from tensorflow.python import ipu

    monkeypatch.delenv("TF_POPLAR_FLAGS", raising=False)
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    change(config)
    config.configure_ipu_system()
    try:
        assert ipu.utils.get_num_of_ipus_in_device("/device:IPU:0") == 1
    finally:
        ipu.config.reset_ipu_configuration()


# -- the IPU model's rules (TF_POPLAR_FLAGS=--use_ipu_model) --------------------------------


@pytest.fixture
def on_the_ipu_model(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda c: setattr(c.ipu_model, "version", ""),
            "ipu_model.version must be set when using the IPUModel",
        ),
        (lambda c: setattr(c.ipu_model, "version", "ipu9"), "ipu_model.version is 'ipu9'"),
        (lambda c: setattr(c, "select_ipus", [0]), "only be specified with `auto_select_ipus`"),
        (lambda c: setattr(c, "select_ipus", 0), "only be specified with `auto_select_ipus`"),
        (
            lambda c: setattr(c.experimental.multi_replica_distribution, "process_count", 2),
            "Multi-replica distribution is not supported on the IPU model",
        ),
    ],
)
def test_ipu_model_rules(on_the_ipu_model, change, message):
    from tensorflow.python import ipu

    config = ipu.config.IPUConfig()
    change(config)
    with pytest.raises(ValueError, match=message):
        config.configure_ipu_system()


def test_ipu_model_takes_its_own_versions_and_any_tile_count(on_the_ipu_model):
    from tensorflow.python import ipu

    for version in ("ipu1", "ipu2", "ipu21"):
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = 2
        config.ipu_model.version = version
        config.ipu_model.tiles_per_ipu = -1
        config.configure_ipu_system()
        try:
            assert ipu.utils.get_num_of_ipus_in_device("/device:IPU:0") == 2
        finally:
            ipu.config.reset_ipu_configuration()
