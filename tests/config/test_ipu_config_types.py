"""Type checking on assignment: strict, with the message naming option, value and type."""

import enum
import functools
import re

import pytest
from spec_ipu_config_table import IPU_SELECTION, SPEC_OPTIONS

from openipu._src.config import (
    DeviceConnectionType,
    ExecutionProfileType,
    IPUConfig,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)

ENUMS_BY_NAME = {
    "SelectionOrder": SelectionOrder,
    "DeviceConnectionType": DeviceConnectionType,
    "StochasticRoundingBehaviour": StochasticRoundingBehaviour,
    "MergeRemoteBuffersBehaviour": MergeRemoteBuffersBehaviour,
    "SchedulingAlgorithm": SchedulingAlgorithm,
}


class _OtherEnum(enum.Enum):
    ON = 1


WRONG_VALUES_BY_TYPE = {
    "bool": [1, 0, "True", None, 1.0],
    "int": [True, False, 1.0, "1", None],
    "float": [1, 0, True, "0.5", None],
    "str": [1, b"ipu2", None, ["ipu2"]],
    "dict": [[], "x", None, [("a", "b")]],
    IPU_SELECTION: [True, 1.5, "1", [1, True], [1.0], (1, "2"), {1}, None, [[1]]],
}
ENUM_WRONG_VALUES = ["ON", 0, 1, None, _OtherEnum.ON, ExecutionProfileType.NO_PROFILE]


def wrong_values(type_string):
    if type_string in ENUMS_BY_NAME:
        return ENUM_WRONG_VALUES
    return WRONG_VALUES_BY_TYPE[type_string]


def good_values(type_string, default):
    if type_string in ENUMS_BY_NAME:
        return [member for member in ENUMS_BY_NAME[type_string] if member != default]
    return {
        "bool": [not default],
        "int": [3, -2, 10**12],
        "float": [0.25, 1.0],
        "str": ["ipu21", "/tmp/somewhere"],
        "dict": [{"availableMemoryProportion": "0.3"}, {}],
        IPU_SELECTION: [2, 0, [1, 2], (4, 4), [], ()],
    }[type_string]


def set_option(config, dotted_name, value):
    *category_names, leaf = dotted_name.split(".")
    category = functools.reduce(getattr, category_names, config)
    setattr(category, leaf, value)


def read(config, dotted_name):
    return functools.reduce(getattr, dotted_name.split("."), config)


WRONG_CASES = [
    pytest.param(name, type_string, value, id=f"{name}={value!r}")
    for name, type_string, _ in SPEC_OPTIONS
    for value in wrong_values(type_string)
    # A bool for esr is the deprecated spelling of ON/OFF (tested with deprecations).
    if not (name == "floating_point_behaviour.esr" and isinstance(value, bool))
]


@pytest.mark.parametrize(("name", "type_string", "value"), WRONG_CASES)
def test_wrong_type_raises_type_error_naming_option_value_and_type(name, type_string, value):
    config = IPUConfig()
    before = read(config, name)
    with pytest.raises(TypeError) as error:
        set_option(config, name, value)
    message = str(error.value)
    assert name in message
    assert repr(value) in message
    assert type_string in message
    assert read(config, name) == before


@pytest.mark.parametrize(("name", "type_string", "value"), WRONG_CASES)
def test_check_type_rejects_wrong_type(name, type_string, value):
    metadata = IPUConfig().get_attribute_metadata(name)
    with pytest.raises(TypeError, match=re.escape(name)):
        metadata.check_type(value)


GOOD_CASES = [
    pytest.param(name, value, id=f"{name}={value!r}")
    for name, type_string, default in SPEC_OPTIONS
    for value in good_values(type_string, default)
    if name != "optimizations.enable_fast_math"  # Deprecated: tested with deprecations.
]


@pytest.mark.parametrize(("name", "value"), GOOD_CASES)
def test_values_of_the_right_type_are_stored(name, value):
    config = IPUConfig()
    set_option(config, name, value)
    assert read(config, name) == value
    assert type(read(config, name)) is type(value)
    assert config.get_attribute_metadata(name).check_type(value) is True


def test_stored_containers_are_copies_of_the_assigned_ones():
    config = IPUConfig()
    ipus = [1, 2]
    options = {"a": "1"}
    config.auto_select_ipus = ipus
    config.convolutions.poplar_options = options
    ipus.append(True)
    options["b"] = "2"
    assert config.auto_select_ipus == [1, 2]
    assert config.convolutions.poplar_options == {"a": "1"}


def test_check_type_on_a_category_raises():
    metadata = IPUConfig().get_attribute_metadata("io_tiles")
    with pytest.raises(TypeError, match="io_tiles"):
        metadata.check_type({})
