"""Every option and category of IPUConfig against the spec table."""

import functools

import pytest
from spec_ipu_config_table import DEPRECATED_OPTIONS, SPEC_CATEGORIES, SPEC_OPTIONS

from openipu._src.config import AttributeMetadata, IPUConfig


def read(config, dotted_name):
    return functools.reduce(getattr, dotted_name.split("."), config)


def test_spec_table_has_57_options():
    assert len(SPEC_OPTIONS) == 57
    assert len({name for name, _, _ in SPEC_OPTIONS}) == 57


def test_config_has_exactly_the_spec_options():
    assert set(IPUConfig().to_dict()) == {name for name, _, _ in SPEC_OPTIONS}


@pytest.mark.parametrize(("name", "type_string", "default"), SPEC_OPTIONS)
def test_default_value(name, type_string, default):
    value = read(IPUConfig(), name)
    assert value == default
    assert type(value) is type(default)


@pytest.mark.parametrize(("name", "type_string", "default"), SPEC_OPTIONS)
def test_metadata(name, type_string, default):
    metadata = IPUConfig().get_attribute_metadata(name)
    assert isinstance(metadata, AttributeMetadata)
    assert metadata.name == name
    assert metadata.type == type_string
    assert metadata.default == default
    assert type(metadata.default) is type(default)
    assert metadata.deprecated == (name in DEPRECATED_OPTIONS)
    assert (metadata.deprecated_msg is None) == (name not in DEPRECATED_OPTIONS)
    assert metadata.check_type(default) is True


@pytest.mark.parametrize(("name", "type_string", "default"), SPEC_OPTIONS)
def test_option_has_documentation(name, type_string, default):
    *category_names, leaf = name.split(".")
    category_class = (
        type(read(IPUConfig(), ".".join(category_names))) if category_names else IPUConfig
    )
    doc = getattr(category_class, leaf).__doc__
    assert doc and len(doc) > 20


@pytest.mark.parametrize("name", SPEC_CATEGORIES)
def test_categories(name):
    config = IPUConfig()
    metadata = config.get_attribute_metadata(name)
    assert metadata.name == name
    assert metadata.type is None
    assert metadata.default is None
    assert metadata.deprecated is False
    assert metadata.deprecated_msg is None
    assert "ategory" in metadata.__doc__
    assert type(read(config, name)).__doc__


def test_every_category_is_in_the_spec_list():
    config = IPUConfig()
    option_categories = {name.rsplit(".", 1)[0] for name, _, _ in SPEC_OPTIONS if "." in name}
    assert option_categories <= set(SPEC_CATEGORIES)
    for name in SPEC_CATEGORIES:
        read(config, name)  # Exists.


def test_mutable_defaults_are_not_shared():
    first, second = IPUConfig(), IPUConfig()
    first.matmuls.poplar_options["availableMemoryProportion"] = "0.1"
    first.auto_select_ipus.append(2)
    assert second.matmuls.poplar_options == {}
    assert second.auto_select_ipus == []
    assert IPUConfig().get_attribute_metadata("matmuls.poplar_options").default == {}


def test_metadata_default_is_a_copy():
    metadata = IPUConfig().get_attribute_metadata("pooling.poplar_options")
    metadata.default["x"] = 1
    assert metadata.default == {}
    assert IPUConfig().pooling.poplar_options == {}


def test_metadata_names_are_relative_to_the_category_but_report_full_names():
    config = IPUConfig()
    assert config.optimizations.get_attribute_metadata("math.fast").name == (
        "optimizations.math.fast"
    )
    assert config.optimizations.math.get_attribute_metadata("fast").type == "bool"
    assert config.norms.get_attribute_metadata("experimental").name == "norms.experimental"
    with pytest.raises(ValueError, match="metadata for 'optimizations.math.fast'"):
        config.optimizations.get_attribute_metadata("optimizations.math.fast")


def test_set_and_read_back_nested_values():
    config = IPUConfig()
    config.optimizations.math.fast = True
    config.io_tiles.available_memory_proportion = 0.5
    config.scheduling.maximum_scheduler_lookahead_depth = 7
    assert config.optimizations.math.fast is True
    assert config.io_tiles.available_memory_proportion == 0.5
    assert config.scheduling.maximum_scheduler_lookahead_depth == 7
    assert IPUConfig().optimizations.math.fast is False
