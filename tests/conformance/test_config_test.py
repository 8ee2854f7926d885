"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/config_test.py`.

Two parts, as in the original. The first checks the machinery of a config tree on a small
config of its own (nested categories, typed and deprecated options, documentation, dicts
and JSON): the original builds it with its private `_ConfigBase`, here with the equivalent
`openipu._src.config.config_tree` classes, with the same names, types, defaults and
docstrings and the same expectations. The second checks `IPUConfig` itself through
`IPUConfig._create_protobuf()`, the `IpuOptions` protobuf the backend receives (its enum
fields compared with the original's protobuf enums, as there), and the rules checked while
creating it.
"""

from __future__ import annotations

import copy
import enum
import json
import logging

import pytest
from tensorflow.compiler.plugin.poplar.driver import threestate_pb2
from tensorflow.compiler.plugin.poplar.driver.config_pb2 import (
    IpuDeviceConnectionType,
    IpuSchedulingAlgorithm,
    IpuSelectionOrder,
)
from tensorflow.python import ipu

from openipu._src.config.config_tree import ConfigCategory, ConfigTree, Option, Subcategory


class TestEnum(enum.Enum):
    __test__ = False  # Not a test class.
    APPLE = 1
    ORANGE = 2
    BANANA = 3
    PEAR = 5


class _Nested4(ConfigCategory):
    attr4 = Option(bool, False, "")
    attr7 = Option(TestEnum, TestEnum.APPLE, "")


class _Nested3(ConfigCategory):
    attr3 = Option(str, "test", "This is the docstring for attr3")
    attr0 = Option(int, 1, "")


class _Nested2(ConfigCategory):
    attr2 = Option(int, 1, "")
    nested4 = Subcategory(_Nested4, "")
    attr5 = Option(
        int,
        1,
        "This is a deprecated attribute, but it's under a config that's also deprecated.",
        deprecated_msg="attr5 is no longer relevant.",
    )


class _Nested1(ConfigCategory):
    attr1 = Option(
        int | list,
        1,
        "This is the docstring for attr1",
        deprecated_msg="Attribute has been removed as it doesn't have an effect.",
    )
    RST_attr = Option(
        int,
        2,
        "This attribute has in-line RST in its docstring which should be preserved.\n\n"
        ".. code-block:: python\n\n  code",
    )
    nested2 = Subcategory(
        _Nested2,
        "This is a docstring that tests deprecating a nested config",
        deprecated_msg="Category is no longer relevant.",
    )
    nested3 = Subcategory(_Nested3, "")


class _TestConfig(ConfigTree):
    attr0 = Option(int | str | list, 1, "This is the docstring for attr0")
    attr6 = Option(
        tuple[list[float | tuple[str]], ...],
        ([1.0],),
        "This is an attribute with a very advanced type hint",
    )
    nested1 = Subcategory(_Nested1, "This is the docstring for the nested1 category")


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# Part one: the machinery of a config tree.


@pytest.mark.follows("testGetFullName")
def test_get_full_name():
    config = _TestConfig()
    assert config._get_full_name("attr0") == "attr0"
    assert config.nested1._get_full_name("attr1") == "nested1.attr1"
    assert config.nested1.nested2._get_full_name("attr2") == "nested1.nested2.attr2"
    assert config.nested1.nested3._get_full_name("attr3") == "nested1.nested3.attr3"
    assert config.nested1.nested3._get_full_name("attr0") == "nested1.nested3.attr0"


@pytest.mark.follows("testAssignment")
def test_assignment():
    config = _TestConfig()
    config.attr0 = 5
    assert config.attr0 == 5
    config.nested1.nested2.attr2 = 5
    assert config.nested1.nested2.attr2 == 5

    with pytest.raises(Exception, match="nested1.nested2 is a category and cannot be assigned to"):
        config.nested1.nested2 = 3
    config.nested1.nested2.attr2 = 1

    with pytest.raises(
        TypeError, match="Trying to set nested1.nested2.attr2 to True, but it must be of type int"
    ):
        config.nested1.nested2.attr2 = True
    assert config.nested1.nested2.attr2 == 1

    with pytest.raises(
        ValueError, match="'_private_attribute' is not a valid attribute of this config."
    ):
        config._private_attribute = []
    with pytest.raises(
        ValueError, match="'_attr_metadata' is not a valid attribute of this config."
    ):
        config._attr_metadata = {}

    # Options with the same name in different categories hold different values.
    config.attr0 = 5
    config.nested1.nested3.attr0 = 5
    assert config.attr0 == config.nested1.nested3.attr0
    config.attr0 = 3
    assert config.attr0 != config.nested1.nested3.attr0


@pytest.mark.follows("testTypeHints")
def test_type_hints():
    config = _TestConfig()
    config.nested1.nested2.attr5 = 2
    for bad in (True, 2.0, "test"):
        with pytest.raises(TypeError, match=r"Trying to set .*, but it must be of type int"):
            config.nested1.nested2.attr5 = bad

    config.attr0 = 1
    config.attr0 = "test"
    config.attr0 = [5, "test", True]
    for bad in (True, (1,), 1.0):
        with pytest.raises(
            TypeError,
            match=r"Trying to set attr0 to .*, but it must be of type "
            r"typing\.Union\[int, str, list\]",
        ):
            config.attr0 = bad

    config.nested1.attr1 = 1
    for bad in (True, (1,), 1.0, "test"):
        with pytest.raises(
            TypeError,
            match=r"Trying to set nested1\.attr1 to .*, but it must be of type "
            r"typing\.Union\[int, list\]",
        ):
            config.nested1.attr1 = bad

    config.attr6 = ([1.0],)
    config.attr6 = ([1.0, 2.0, ("test1",)],)
    config.attr6 = ([5.0], [("test2",)])
    for bad in (True, ([True],), ([1.0], ["test1"]), ([1.0], [("test1",), 1])):
        with pytest.raises(
            TypeError,
            match=r"Trying to set attr6 to .*, but it must be of type "
            r"typing\.Tuple\[typing.List\[typing.Union\[float, typing\.Tuple\[str\]\]\], \.\.\.\]",
        ):
            config.attr6 = bad
    assert config.attr6 == ([5.0], [("test2",)])


@pytest.mark.follows("testDidYouMean")
def test_did_you_mean():
    config = _TestConfig()
    message = "'attr5' is not a valid attribute of this config. Did you mean 'nested1.attr1'?"
    with pytest.raises(ValueError, match=message):
        config.nested1.attr5  # noqa: B018
    with pytest.raises(ValueError, match=message):
        config.nested1.attr5 = 3
    message = "'nested5' is not a valid attribute of this config. Did you mean 'nested1'?"
    with pytest.raises(ValueError, match=message):
        config.nested5  # noqa: B018
    with pytest.raises(ValueError, match=message):
        config.nested5 = 3
    message = "'nested11' is not a valid attribute of this config. Did you mean 'nested1'?"
    with pytest.raises(ValueError, match=message):
        config.nested11.nested7.nested9.nested23.attr5  # noqa: B018
    with pytest.raises(ValueError) as error:
        config.nested1.nested2.very_dissimilar_attribute = 3
    assert str(error.value) == (
        "'very_dissimilar_attribute' is not a valid attribute of this config."
    )


@pytest.mark.follows("testAttributeMetadata")
def test_attribute_metadata():
    config = _TestConfig()

    def check(category, name, full_name, type_string, default, doc, depth):
        metadata = category.get_attribute_metadata(name)
        assert metadata.name == full_name
        assert metadata.type == type_string
        assert metadata.default == default
        assert metadata.__doc__ == doc
        assert metadata._depth == depth

    check(config, "attr0", "attr0", "typing.Union[int, str, list]", 1,
          "This is the docstring for attr0", 1)  # fmt: skip
    check(
        config, "attr6", "attr6",
        "typing.Tuple[typing.List[typing.Union[float, typing.Tuple[str]]], ...]", ([1.0],),
        "This is an attribute with a very advanced type hint", 1,
    )  # fmt: skip
    with pytest.raises(ValueError, match="Could not get attribute metadata for 'nested1.attr5': "):
        config.get_attribute_metadata("nested1.attr5")
    check(config, "nested1.nested3.attr3", "nested1.nested3.attr3", "str", "test",
          "This is the docstring for attr3", 3)  # fmt: skip
    check(config, "nested1.nested3.attr0", "nested1.nested3.attr0", "int", 1,
          "No description provided.", 3)  # fmt: skip
    check(config, "nested1", "nested1", None, None,
          "This is the docstring for the nested1 category", 1)  # fmt: skip
    check(config.nested1, "attr1", "nested1.attr1", "typing.Union[int, list]", 1,
          "This is the docstring for attr1", 2)  # fmt: skip
    with pytest.raises(
        ValueError, match="Could not get attribute metadata for 'nested1.attr1': 'nested1' "
    ):
        config.nested1.get_attribute_metadata("nested1.attr1")
    with pytest.raises(
        ValueError, match="Could not get attribute metadata for '_attr_metadata': '_attr_"
    ):
        config.get_attribute_metadata("_attr_metadata")


@pytest.mark.follows("testDeprecation")
def test_deprecation(caplog):
    config = _TestConfig()
    with caplog.at_level(logging.WARNING):
        config.nested1.attr1 = 2
    assert _warnings(caplog) == [
        "nested1.attr1 has been deprecated: Attribute has been removed as it doesn't have an "
        "effect."
    ]
    metadata = config.get_attribute_metadata("nested1.attr1")
    assert metadata.deprecated
    assert metadata.deprecated_msg == "Attribute has been removed as it doesn't have an effect."

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        config.nested1.nested3.attr3 = "test3"
    assert _warnings(caplog) == []
    metadata = config.get_attribute_metadata("nested1.nested3.attr3")
    assert not metadata.deprecated
    assert metadata.deprecated_msg is None
    assert "DEPRECATED: " not in metadata.__doc__

    # Everything under a deprecated category is deprecated too.
    for name in (
        "nested1.nested2",
        "nested1.nested2.attr2",
        "nested1.nested2.nested4",
        "nested1.nested2.nested4.attr4",
    ):
        assert config.get_attribute_metadata(name).deprecated, name
    with caplog.at_level(logging.WARNING):
        config.nested1.nested2.attr2 = 5
        assert _warnings(caplog)[-1] == (
            "nested1.nested2.attr2 has been deprecated: Category is no longer relevant."
        )
        config.nested1.nested2.nested4.attr4 = True
        assert _warnings(caplog)[-1] == (
            "nested1.nested2.nested4.attr4 has been deprecated: Category is no longer relevant."
        )
        # An option's own message is kept under a deprecated category.
        config.nested1.nested2.attr5 = 5
        assert _warnings(caplog)[-1] == (
            "nested1.nested2.attr5 has been deprecated: attr5 is no longer relevant."
        )


@pytest.mark.follows("testDocGeneration")
def test_doc_generation():
    doc = _TestConfig.__doc__
    attr0 = "\n".join(
        [
            "      .. _attr0:",
            "      .. py:attribute:: attr0",
            "         :type: typing.Union[int, str, list]",
            "         :value: 1",
            "      ",
            "         This is the docstring for attr0",
        ]
    )
    nested1 = "\n".join(
        [
            "      .. _nested1:",
            "      .. py:attribute:: nested1",
            "      ",
            "         This is the docstring for the nested1 category",
        ]
    )
    nested2 = "\n".join(
        [
            "         .. _nested1.nested2:",
            "         .. py:attribute:: nested1.nested2",
            "         ",
            "            .. note::\n",
            "               DEPRECATED: Category is no longer relevant.\n",
            "            This is a docstring that tests deprecating a nested config",
        ]
    )
    attr1 = "\n".join(
        [
            "         .. _nested1.attr1:",
            "         .. py:attribute:: nested1.attr1",
            "            :type: typing.Union[int, list]",
            "            :value: 1",
            "         ",
            "            .. note::\n",
            "               DEPRECATED: Attribute has been removed as it doesn't have an effect.\n",
            "            This is the docstring for attr1",
        ]
    )
    # Sphinx strips a class-like prefix from deeply nested names: the first entry of a
    # category deeper than two repeats it.
    attr2 = "\n".join(
        [
            "            .. _nested1.nested2.attr2:",
            "            .. py:attribute:: nested1.nested1.nested2.attr2",
            "               :type: int",
            "               :value: 1",
            "            ",
            "               .. note::\n",
            "                  DEPRECATED: Category is no longer relevant.\n",
            "               No description provided.",
        ]
    )
    rst = "\n".join(
        [
            "            This attribute has in-line RST in its docstring which should be preserved.",
            "            ",
            "            .. code-block:: python",
            "            ",
            "              code",
        ]
    )
    for entry in (attr0, nested1, nested2, attr1, attr2, rst):
        assert doc.count(entry) == 1, entry
    for name in ("attr0", "nested1", "nested1.nested2", "nested1.attr1"):
        assert doc.count(f".. py:attribute:: {name}\n") == 1
    # Making configs does not repeat the documentation.
    _TestConfig()
    _TestConfig()
    assert _TestConfig.__doc__ == doc


@pytest.mark.follows("testToProtobuf")
def test_to_protobuf_covers_every_nested_category():
    config = ipu.config.IPUConfig()
    config.allow_recompute = True  # The root.
    config.io_tiles.num_io_tiles = 8  # A category.
    config.optimizations.math.fast = True  # A category inside one with options of its own.
    config.norms.experimental.distributed_batch_norm_replica_group_size = 1
    config.experimental.multi_replica_distribution.process_count = 2  # Inside one without.
    pb = config._create_protobuf()
    assert pb.speed_size_config.allow_recompute is True
    assert pb.num_io_tiles == 8
    assert pb.algebraic_simplifier_config.enable_fast_math is True
    assert pb.experimental_distributed_batch_norm_replica_group_size == 1
    assert pb.multi_replica_process_count == 2


@pytest.mark.follows("testParallelConfigs")
def test_parallel_configs():
    config1, config2 = _TestConfig(), _TestConfig()
    assert config1.attr0 == 1
    assert config2.attr0 == 1
    config1.attr0 = 2
    assert config1.attr0 == 2
    assert config2.attr0 == 1


@pytest.mark.follows("testParallelConfigsDeprecation")
def test_parallel_configs_deprecation():
    class Config1(ConfigTree):
        attr0 = Option(int, 1, "", deprecated_msg="config1 message")

    class Config2(ConfigTree):
        attr0 = Option(int, 1, "", deprecated_msg="config2 message")

    assert Config1().get_attribute_metadata("attr0").deprecated_msg == "config1 message"
    assert Config2().get_attribute_metadata("attr0").deprecated_msg == "config2 message"


@pytest.mark.follows("testDeepCopy")
def test_deep_copy():
    config = _TestConfig()
    config.attr0 = [5]
    config.nested1.attr1 = [2]
    duplicate = copy.deepcopy(config)
    assert duplicate.attr0 == [5] and duplicate.attr0 is not config.attr0
    assert duplicate.nested1.attr1 == [2] and duplicate.nested1.attr1 is not config.nested1.attr1


@pytest.mark.follows("testToDictAndToJson")
@pytest.mark.parametrize("is_json", [True, False])
def test_to_dict_and_to_json(is_json):
    config = _TestConfig()
    config.attr0 = 1234
    config.nested1.attr1 = 5678
    attrs = json.loads(config.to_json()) if is_json else config.to_dict()
    assert attrs["attr0"] == 1234
    assert attrs["nested1.attr1"] == 5678


@pytest.mark.follows("testFromDictAndFromJson")
@pytest.mark.parametrize("is_json", [True, False])
def test_from_dict_and_from_json(is_json):
    attrs = {"attr0": 12, "nested1.attr1": 34, "nested1.nested2.attr2": 56}
    config = _TestConfig()
    config.attr0 = 5
    config.nested1.attr1 = 5
    config.nested1.nested2.attr2 = 5
    if is_json:
        config.from_json(json.dumps(attrs))
    else:
        config.from_dict(attrs)
    assert config.attr0 == 12
    assert config.nested1.attr1 == 34
    assert config.nested1.nested2.attr2 == 56


@pytest.mark.follows("testToDictAndToJsonOnEnums")
@pytest.mark.parametrize("is_json", [True, False])
def test_to_dict_and_to_json_on_enums(is_json):
    config = _TestConfig()
    config.attr0 = 12
    config.nested1.attr1 = 3
    config.nested1.nested2.attr2 = 5
    config.nested1.nested2.nested4.attr7 = TestEnum.BANANA
    actual = json.loads(config.to_json()) if is_json else config.to_dict()
    assert actual["attr0"] == 12
    assert actual["nested1.attr1"] == 3 and type(actual["nested1.attr1"]) is int
    assert actual["nested1.nested2.attr2"] == 5
    # Enum members are written as their values.
    assert actual["nested1.nested2.nested4.attr7"] == 3


@pytest.mark.follows("testFromDictAndFromJsonOnEnums")
@pytest.mark.parametrize("is_json", [True, False])
def test_from_dict_and_from_json_on_enums(is_json):
    attrs = {
        "attr0": 12,
        "nested1.attr1": 2,
        "nested1.nested2.attr2": 56,
        "nested1.nested2.nested4.attr7": 2,
    }
    config = _TestConfig()
    config.attr0 = 5
    config.nested1.attr1 = 5
    config.nested1.nested2.attr2 = 5
    if is_json:
        config.from_json(json.dumps(attrs))
    else:
        config.from_dict(attrs)
    assert config.attr0 == 12
    assert config.nested1.attr1 == 2 and type(config.nested1.attr1) is int
    assert config.nested1.nested2.attr2 == 56
    assert config.nested1.nested2.nested4.attr7 is TestEnum.ORANGE


@pytest.mark.follows("testRepr")
def test_repr():
    config = _TestConfig()
    config.attr0 = 12
    config.nested1.attr1 = 34
    config.nested1.nested2.attr2 = 56
    config.nested1.nested2.nested4.attr7 = TestEnum.PEAR
    lines = repr(config).split("\n")
    assert lines[0] == "_TestConfig:"
    for line in (
        "  attr0 = 12",
        "  attr6 = ([1.0],)",
        "  nested1.attr1 = 34",
        "  nested1.nested2.attr2 = 56",
        "  nested1.nested2.nested4.attr4 = False",
        "  nested1.nested2.nested4.attr7 = TestEnum.PEAR",
        "  nested1.nested2.attr5 = 1",
        "  nested1.nested3.attr3 = 'test'",
        "  nested1.nested3.attr0 = 1",
    ):
        assert line in lines[1:]


@pytest.mark.follows("testUnionOfIntAndEnumFails")
def test_union_of_int_and_enum_fails():
    with pytest.raises(ValueError, match="cannot have a Union of int and Enum"):

        class BadConfig(ConfigTree):
            bad_config_var = Option(int | TestEnum, TestEnum.APPLE, "")


# Part two: IPUConfig and the options record made from it.


@pytest.fixture
def ipu_model(monkeypatch):
    """The program targets the IPU model, as the original's tests of the model's rules do."""
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")


@pytest.fixture
def hardware(monkeypatch):
    """The program targets IPU hardware: no `--use_ipu_model`."""
    monkeypatch.delenv("TF_POPLAR_FLAGS", raising=False)


def _set(config, dotted_name, value):
    *categories, name = dotted_name.split(".")
    for category in categories:
        config = getattr(config, category)
    setattr(config, name, value)


def _field(pb, dotted_field):
    for part in dotted_field.split("."):
        pb = getattr(pb, part)
    return pb


@pytest.mark.follows("testCreateConfig")
def test_create_config():
    assert isinstance(ipu.config.IPUConfig(), ipu.utils.IPUConfig)


def _check_devices(selection, field, expected):
    config = ipu.config.IPUConfig()
    assert config._create_protobuf().device_config == []
    setattr(config, selection, expected)
    devices = config._create_protobuf().device_config
    wanted = [expected] if isinstance(expected, int) else list(expected)
    assert [getattr(device, field) for device in devices] == wanted


@pytest.mark.follows("testAutoSelectInteger")
def test_auto_select_integer():
    _check_devices("auto_select_ipus", "auto_count", 2)


@pytest.mark.follows("testAutoSelectList")
def test_auto_select_list():
    _check_devices("auto_select_ipus", "auto_count", [4, 4])


@pytest.mark.follows("testAutoSelectListManyDevices")
def test_auto_select_list_many_devices():
    _check_devices("auto_select_ipus", "auto_count", [2, 3, 4, 5])


@pytest.mark.follows("testAutoSelectTuple")
def test_auto_select_tuple():
    _check_devices("auto_select_ipus", "auto_count", (2, 2))


@pytest.mark.follows("testAutoSelectBoolFails")
def test_auto_select_bool_fails():
    with pytest.raises(TypeError, match="Trying to set auto_select_ipus to True, but it must be"):
        ipu.config.IPUConfig().auto_select_ipus = True


@pytest.mark.follows("testAutoSelectAndSelectIPUsMutuallyExclusive")
def test_auto_select_and_select_ipus_mutually_exclusive():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [1, 1]
    config.select_ipus = [1, 2]
    with pytest.raises(Exception, match="Only one of `auto_select_ipus` and `select_ipus` can be"):
        config._create_protobuf()


@pytest.mark.follows("testAutoSelectOnlyWhenUsingIPUModel")
def test_auto_select_only_when_using_ipu_model(ipu_model):
    config = ipu.config.IPUConfig()
    config.select_ipus = [1, 2]
    config.auto_select_ipus = []
    with pytest.raises(Exception, match="When using the IPUModel, the devices to attach to"):
        config._create_protobuf()


@pytest.mark.follows("testSelectIPUsInteger")
def test_select_ipus_integer(hardware):
    _check_devices("select_ipus", "cfg_index", 1)


@pytest.mark.follows("testSelectIPUsList")
def test_select_ipus_list(hardware):
    _check_devices("select_ipus", "cfg_index", [1, 2])


@pytest.mark.follows("testSelectIPUsTuple")
def test_select_ipus_tuple(hardware):
    _check_devices("select_ipus", "cfg_index", (1, 2))


@pytest.mark.follows("testSelectIPUsBoolFails")
def test_select_ipus_bool_fails():
    with pytest.raises(TypeError, match="Trying to set select_ipus to True, but it must be"):
        ipu.config.IPUConfig().select_ipus = True


def _check_field(option, field, default, value, expected):
    """The record holds the original's default for `option`, and a set value reaches it."""
    config = ipu.config.IPUConfig()
    assert _field(config._create_protobuf(), field) == default
    _set(config, option, value)
    assert _field(config._create_protobuf(), field) == expected


def _check_poplar_options(option, field):
    config = ipu.config.IPUConfig()
    assert _field(config._create_protobuf(), field) == []
    _set(config, option, {"A": "B", "C": "D"})
    flags = _field(config._create_protobuf(), field)
    assert [(flag.option, flag.value) for flag in flags] == [("A", "B"), ("C", "D")]


@pytest.mark.follows("testAllowRecompute")
def test_allow_recompute(hardware):
    _check_field("allow_recompute", "speed_size_config.allow_recompute", False, True, True)


@pytest.mark.follows("testSelectionOrder")
def test_selection_order(hardware):
    _check_field(
        "selection_order",
        "selection_order",
        IpuSelectionOrder.AUTO,
        ipu.config.SelectionOrder.SNAKE,
        IpuSelectionOrder.SNAKE,
    )


@pytest.mark.follows("testSerializationOutputFolder")
def test_serialization_output_folder(hardware):
    _check_field(
        "serialization_output_folder", "serialization_folder", "", "/a/test/path", "/a/test/path"
    )


@pytest.mark.follows("testDeviceConnectionVersion")
def test_device_connection_version(hardware):
    _check_field("device_connection.version", "ipu_version", "", "ipu2", "ipu2")


@pytest.mark.follows("testDeviceConnectionType")
def test_device_connection_type(hardware):
    _check_field(
        "device_connection.type",
        "device_connection_type",
        IpuDeviceConnectionType.ALWAYS,
        ipu.config.DeviceConnectionType.ON_DEMAND,
        IpuDeviceConnectionType.ON_DEMAND,
    )


@pytest.mark.follows("testDeviceConnectionEnableRemoteBuffers")
def test_device_connection_enable_remote_buffers(hardware):
    _check_field(
        "device_connection.enable_remote_buffers",
        "enable_remote_buffers_without_device",
        False,
        True,
        True,
    )


@pytest.mark.follows("testExperimentalAlwaysRearrangeCopiesOnTheHost")
def test_experimental_always_rearrange_copies_on_the_host(hardware):
    _check_field(
        "experimental.always_rearrange_copies_on_the_host",
        "speed_size_config.always_rearrange_copies_on_the_host",
        False,
        True,
        True,
    )


@pytest.mark.follows("testExperimentalEnableRemoteBufferEmbedding")
def test_experimental_enable_remote_buffer_embedding(hardware):
    _check_field(
        "experimental.enable_remote_buffer_embedding",
        "enable_experimental_remote_buffer_embedding",
        False,
        True,
        True,
    )


@pytest.mark.follows("testExperimentalEnablePrngStability")
def test_experimental_enable_prng_stability(hardware):
    _check_field(
        "experimental.enable_prng_stability",
        "enable_experimental_prng_stability",
        False,
        True,
        True,
    )


@pytest.mark.follows("testExperimentalMultiReplicaDistributionProcessCount")
def test_experimental_multi_replica_distribution_process_count(hardware):
    _check_field(
        "experimental.multi_replica_distribution.process_count",
        "multi_replica_process_count",
        0,
        2,
        2,
    )


@pytest.mark.follows("testIOTilesNumIOTiles")
def test_io_tiles_num_io_tiles(hardware):
    _check_field("io_tiles.num_io_tiles", "num_io_tiles", 0, 10, 10)


@pytest.mark.follows("testIOTilesAvailableMemoryProportion")
def test_io_tiles_available_memory_proportion(hardware):
    _check_field(
        "io_tiles.available_memory_proportion", "io_tile_available_memory_proportion", 0.9, 0.1, 0.1
    )


@pytest.mark.follows("testIPUModelCompileIPUCode")
def test_ipu_model_compile_ipu_code(hardware):
    _check_field(
        "ipu_model.compile_ipu_code", "ipu_model_config.compile_ipu_code", True, False, False
    )


@pytest.mark.follows("testIPUModelTilesPerIPU")
def test_ipu_model_tiles_per_ipu(hardware):
    _check_field("ipu_model.tiles_per_ipu", "ipu_model_config.tiles_per_ipu", 0, 100, 100)


@pytest.mark.follows("testIPUModelVersion")
def test_ipu_model_version(hardware):
    _check_field("ipu_model.version", "ipu_model_config.ipu_model_version", "ipu2", "ipu1", "ipu1")


@pytest.mark.follows("testMatmulsClearPassType")
def test_matmuls_clear_pass_type(hardware):
    _check_field("matmuls.clear_pass_type", "clear_matmul_pass_type", False, True, True)


@pytest.mark.follows("testNormsUseStableStatistics")
def test_norms_use_stable_statistics(hardware):
    _check_field("norms.use_stable_statistics", "use_stable_norm_statistics", False, True, True)


@pytest.mark.follows("testNormsExperimentalDistributedBatchNormReplicaGroupSize")
def test_norms_experimental_distributed_batch_norm_replica_group_size(hardware):
    _check_field(
        "norms.experimental.distributed_batch_norm_replica_group_size",
        "experimental_distributed_batch_norm_replica_group_size",
        1,
        8,
        8,
    )


@pytest.mark.follows("testOptimizationsPrefetchDataStreams")
def test_optimizations_prefetch_data_streams(hardware):
    _check_field("optimizations.prefetch_data_streams", "prefetch_data_streams", True, False, False)


@pytest.mark.follows("testOptimizationsCombineEmbeddingLookups")
def test_optimizations_combine_embedding_lookups(hardware):
    _check_field(
        "optimizations.combine_embedding_lookups", "enable_multi_slice_combiner", False, True, True
    )


@pytest.mark.follows("testOptimizationsCombineMatmuls")
def test_optimizations_combine_matmuls(hardware):
    _check_field("optimizations.combine_matmuls", "enable_matmul_combiner", False, True, True)


@pytest.mark.follows("testOptimizationsEnableGraphOutlining")
def test_optimizations_enable_graph_outlining(hardware):
    _check_field(
        "optimizations.enable_graph_outlining",
        "speed_size_config.disable_graph_outlining",
        False,
        False,
        True,
    )


@pytest.mark.follows("testOptimizationsMergeInfeedIOCopies")
def test_optimizations_merge_infeed_io_copies(hardware):
    _check_field(
        "optimizations.merge_infeed_io_copies",
        "speed_size_config.merge_infeed_io_copies",
        True,
        False,
        False,
    )


@pytest.mark.follows("testOptimizationsMaximumCrossReplicaSumBufferSize")
def test_optimizations_maximum_cross_replica_sum_buffer_size(hardware):
    _check_field(
        "optimizations.maximum_cross_replica_sum_buffer_size",
        "max_cross_replica_sum_buffer_size",
        0,
        1024768,
        1024768,
    )


@pytest.mark.follows("testOptimizationsMaximumReduceScatterBufferSize")
def test_optimizations_maximum_reduce_scatter_buffer_size(hardware):
    _check_field(
        "optimizations.maximum_reduce_scatter_buffer_size",
        "max_reduce_scatter_buffer_size",
        0,
        1024768,
        1024768,
    )


@pytest.mark.follows("testOptimizationsMaximumInterIPUCopiesBufferSize")
def test_optimizations_maximum_inter_ipu_copies_buffer_size(hardware):
    _check_field(
        "optimizations.maximum_inter_ipu_copies_buffer_size",
        "max_inter_ipu_copies_buffer_size",
        0,
        1024768,
        1024768,
    )


@pytest.mark.follows("testOptimizationsMaximumReduceManyBufferSize")
def test_optimizations_maximum_reduce_many_buffer_size(hardware):
    _check_field(
        "optimizations.maximum_reduce_many_buffer_size",
        "max_reduce_many_buffer_size",
        0,
        1024768,
        1024768,
    )


@pytest.mark.follows("testOptimizationsMaximumGatherBufferSize")
def test_optimizations_maximum_gather_buffer_size(hardware):
    _check_field(
        "optimizations.maximum_all_gather_buffer_size",
        "max_all_gather_buffer_size",
        0,
        1024768,
        1024768,
    )


@pytest.mark.follows("testOptimizationsMaximumSendRecvClusterSize")
def test_optimizations_maximum_send_recv_cluster_size(hardware):
    _check_field(
        "optimizations.maximum_send_recv_cluster_size",
        "max_send_recv_cluster_size",
        0,
        1024768,
        1024768,
    )


@pytest.mark.follows("testOptimizationsMinimumRemoteTensorSize")
def test_optimizations_minimum_remote_tensor_size(hardware):
    _check_field(
        "optimizations.minimum_remote_tensor_size", "minimum_remote_tensor_size", 128, 64, 64
    )


@pytest.mark.follows("testOptimizationsMergeRemoteBuffers")
def test_optimizations_merge_remote_buffers(hardware):
    _check_field(
        "optimizations.merge_remote_buffers",
        "remote_buffer_merging_mode",
        threestate_pb2.THREESTATE_UNDEFINED,
        ipu.utils.MergeRemoteBuffersBehaviour.NO_MERGING,
        threestate_pb2.THREESTATE_OFF,
    )


@pytest.mark.follows("testOptimizationsEnableGatherSimplifier")
def test_optimizations_enable_gather_simplifier(hardware):
    _check_field(
        "optimizations.enable_gather_simplifier", "disable_gather_simplifier", False, False, True
    )


@pytest.mark.follows("testOptimizationsTriangularSolveExpanderBlockSize")
def test_optimizations_triangular_solve_expander_block_size(hardware):
    _check_field(
        "optimizations.triangular_solve_expander_block_size",
        "triangular_solve_expander_block_size",
        0,
        100,
        100,
    )


@pytest.mark.follows("testOptimizationsCholeskyBlockSize")
def test_optimizations_cholesky_block_size(hardware):
    _check_field("optimizations.cholesky_block_size", "cholesky_block_size", 0, 100, 100)


@pytest.mark.follows("testSchedulingAlgorithm")
def test_scheduling_algorithm(hardware):
    _check_field(
        "scheduling.algorithm",
        "speed_size_config.scheduler_selection",
        IpuSchedulingAlgorithm.CHOOSE_BEST,
        ipu.utils.SchedulingAlgorithm.SHORTEST_PATH,
        IpuSchedulingAlgorithm.SHORTEST_PATH,
    )


@pytest.mark.follows("testSchedulingMaximumSchedulerLookaheadDepth")
def test_scheduling_maximum_scheduler_lookahead_depth(hardware):
    _check_field(
        "scheduling.maximum_scheduler_lookahead_depth", "max_scheduler_lookahead_depth", 5, 100, 100
    )


@pytest.mark.follows("testSchedulingMaximumSchedulerSearchSpaceSize")
def test_scheduling_maximum_scheduler_search_space_size(hardware):
    _check_field(
        "scheduling.maximum_scheduler_search_space_size",
        "max_scheduler_search_space_size",
        64,
        100,
        100,
    )


@pytest.mark.follows("testCompilationPoplarOptions")
def test_compilation_poplar_options():
    _check_poplar_options("compilation_poplar_options", "compilation_options")


@pytest.mark.follows("testGCLPoplarOptions")
def test_gcl_poplar_options():
    _check_poplar_options("gcl_poplar_options", "gcl_options")


@pytest.mark.follows("testConvolutionsPoplarOptions")
def test_convolutions_poplar_options():
    _check_poplar_options("convolutions.poplar_options", "convolution_options")


@pytest.mark.follows("testSlicesPoplarOptions")
def test_slices_poplar_options():
    _check_poplar_options("slices.poplar_options", "slice_options")


@pytest.mark.follows("testMatmulsPoplarOptions")
def test_matmuls_poplar_options():
    _check_poplar_options("matmuls.poplar_options", "matmul_options")


@pytest.mark.follows("testPoolingPoplarOptions")
def test_pooling_poplar_options():
    _check_poplar_options("pooling.poplar_options", "pooling_options")


@pytest.mark.follows("testDeviceConnectionTypeVersionRequired")
def test_device_connection_type_version_required():
    config = ipu.config.IPUConfig()
    config.device_connection.version = ""
    for connection in (
        ipu.utils.DeviceConnectionType.PRE_COMPILE,
        ipu.utils.DeviceConnectionType.NEVER,
    ):
        config.device_connection.type = connection
        with pytest.raises(ValueError, match="device_connection.version must be set when"):
            config._create_protobuf()


@pytest.mark.follows("testExperimentalMultiReplicaDistributionProcessCountAndIPUModel")
def test_multi_replica_distribution_process_count_and_ipu_model(ipu_model):
    config = ipu.config.IPUConfig()
    config.experimental.multi_replica_distribution.process_count = 2
    with pytest.raises(
        Exception, match="Multi-replica distribution is not supported on the IPU model."
    ):
        config._create_protobuf()


@pytest.mark.follows("testExperimentalMultiReplicaDistributionProcessIndex")
def test_multi_replica_distribution_process_index(hardware):
    config = ipu.config.IPUConfig()
    assert config._create_protobuf().multi_replica_process_index == 0
    # The original sets the index alone, with no process count (0, distribution off).
    config.experimental.multi_replica_distribution.process_index = 1
    assert config._create_protobuf().multi_replica_process_index == 1


@pytest.mark.follows("testExperimentalMultiReplicaDistributionProcessIndexOutOfBounds")
def test_multi_replica_distribution_process_index_out_of_bounds(hardware):
    config = ipu.config.IPUConfig()
    config.experimental.multi_replica_distribution.process_count = 1
    for index in (5, -1):
        config.experimental.multi_replica_distribution.process_index = index
        with pytest.raises(
            ValueError,
            match="experimental.multi_replica_distribution.process_index must be in the range",
        ):
            config._create_protobuf()


def _fp_options(pb) -> list:
    fp = pb.floating_point_behaviour
    return [fp.inv, fp.div0, fp.oflo, fp.esr, fp.nanoo]


@pytest.mark.follows("testFloatingPointBehaviour")
def test_floating_point_behaviour():
    config = ipu.config.IPUConfig()
    assert _fp_options(config._create_protobuf()) == [False] * 5
    config.floating_point_behaviour.inv = True
    assert _fp_options(config._create_protobuf()) == [True, False, False, False, False]
    config.floating_point_behaviour.inv = False
    config.floating_point_behaviour.oflo = True
    config.floating_point_behaviour.nanoo = True
    assert _fp_options(config._create_protobuf()) == [False, False, True, False, True]


@pytest.mark.follows("testFloatingPointBehaviourSetAll")
def test_floating_point_behaviour_set_all():
    config = ipu.config.IPUConfig()
    assert _fp_options(config._create_protobuf()) == [False] * 5
    config.floating_point_behaviour.set_all = True
    # esr holds StochasticRoundingBehaviour.ON's value, 1.
    assert _fp_options(config._create_protobuf()) == [True] * 5


@pytest.mark.follows("testIOTilesPlaceOpsOnIOTiles")
def test_io_tiles_place_ops_on_io_tiles():
    config = ipu.config.IPUConfig()
    assert config._create_protobuf().place_ops_on_io_tiles is False
    config.io_tiles.num_io_tiles = 10
    config.io_tiles.place_ops_on_io_tiles = True
    assert config._create_protobuf().place_ops_on_io_tiles is True


@pytest.mark.follows("testIOTilesPlaceOpsOnIOTilesWhenNoIOTiles")
def test_io_tiles_place_ops_on_io_tiles_when_no_io_tiles():
    config = ipu.config.IPUConfig()
    config.io_tiles.num_io_tiles = 0
    config.io_tiles.place_ops_on_io_tiles = True
    with pytest.raises(ValueError, match="Cannot place ops on I/O tiles when"):
        config._create_protobuf()


@pytest.mark.follows("testIPUModelVersionRequiredWhenRunningOnIPUModel")
def test_ipu_model_version_required_when_running_on_ipu_model(ipu_model):
    config = ipu.config.IPUConfig()
    config.ipu_model.version = ""
    with pytest.raises(ValueError, match="ipu_model.version must be set"):
        config._create_protobuf()
    config.ipu_model.version = "ipu1"
    assert config._create_protobuf().ipu_model_config.ipu_model_version == "ipu1"


@pytest.mark.follows("testNormsExperimentalDistributedBatchNormReplicaGroupSizeAndIOTiles")
def test_distributed_batch_norm_replica_group_size_and_io_tiles():
    config = ipu.config.IPUConfig()
    config.norms.experimental.distributed_batch_norm_replica_group_size = 2
    config.io_tiles.num_io_tiles = 10
    with pytest.raises(ValueError, match="is not supported with I/O tiles."):
        config._create_protobuf()


@pytest.mark.follows("testOptimizationsEnableFastMath")
def test_optimizations_enable_fast_math(caplog):
    config = ipu.config.IPUConfig()

    def fast_math():
        pb = config._create_protobuf()
        return pb.algebraic_simplifier_config.enable_fast_math, pb.enable_fast_math

    assert fast_math() == (False, False)
    config.optimizations.math.fast = True
    assert fast_math() == (True, False)
    config.optimizations.enable_fast_math = True
    assert fast_math() == (True, True)
    config.optimizations.math.fast = False
    assert fast_math() == (False, True)
    config.optimizations.enable_fast_math = False
    assert fast_math() == (False, False)


@pytest.mark.follows("testOptimizationsEnableDynamicSliceReplacement")
def test_optimizations_enable_dynamic_slice_replacement():
    config = ipu.config.IPUConfig()
    config.optimizations.enable_dynamic_slice_replacement = False
    assert config._create_protobuf().enable_dynamic_slice_replacement is False
    config.optimizations.enable_dynamic_slice_replacement = True
    assert config._create_protobuf().enable_dynamic_slice_replacement is True


@pytest.mark.follows("testCheckMetadata")
def test_check_metadata():
    config = ipu.config.IPUConfig()
    metadata = config.get_attribute_metadata("auto_select_ipus")
    assert metadata.name == "auto_select_ipus"
    assert "Configure the IPUs to be used " in metadata.__doc__
    assert metadata.type == "typing.Union[int, typing.List[int], typing.Tuple[int, ...]]"
    assert metadata.default == []
    assert metadata.deprecated is False
    assert metadata.deprecated_msg is None
    assert metadata._depth == 1

    metadata = config.get_attribute_metadata("ipu_model.version")
    assert metadata.name == "ipu_model.version"
    assert "Specify the IPU version to be used by " in metadata.__doc__
    assert metadata.type == "str"
    assert metadata.default == "ipu2"
    assert metadata.deprecated is False
    assert metadata.deprecated_msg is None
    assert metadata._depth == 2
