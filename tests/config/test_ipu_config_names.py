"""Unknown names, suggestions and categories that cannot be assigned."""

import copy

import pytest

from openipu._src.config import IPUConfig


@pytest.mark.parametrize(
    ("category_path", "wrong_name", "suggested"),
    [
        ("", "allow_recompue", "allow_recompute"),
        ("", "auto_select_ipu", "auto_select_ipus"),
        ("", "num_io_tiles", "io_tiles.num_io_tiles"),
        ("optimizations.math", "fst", "optimizations.math.fast"),
        ("optimizations", "fast", "optimizations.math.fast"),
        ("io_tiles", "num_io_tile", "io_tiles.num_io_tiles"),
    ],
)
def test_unknown_attribute_is_named_with_a_suggestion(category_path, wrong_name, suggested):
    category = IPUConfig()
    for name in filter(None, category_path.split(".")):
        category = getattr(category, name)

    with pytest.raises(ValueError) as set_error:
        setattr(category, wrong_name, True)
    with pytest.raises(ValueError) as get_error:
        getattr(category, wrong_name)
    for error in (set_error, get_error):
        message = str(error.value)
        # The original's words name the attribute as written; suggestions give full names.
        assert f"'{wrong_name}' is not a valid attribute of this config." in message
        assert "Did you mean" in message
        assert f"'{suggested}'" in message.split("Did you mean", 1)[1]


def test_unknown_attribute_is_also_an_attribute_error():
    config = IPUConfig()
    with pytest.raises(AttributeError):
        config.not_an_option  # noqa: B018
    assert not hasattr(config, "not_an_option")
    assert getattr(config.optimizations, "not_an_option", "fallback") == "fallback"


def test_unknown_attribute_without_anything_close():
    with pytest.raises(ValueError, match="'xyzzy' is not a valid attribute") as error:
        IPUConfig().xyzzy = 1
    assert "Did you mean" not in str(error.value)


def test_ambiguous_leaf_lists_every_candidate():
    with pytest.raises(ValueError) as error:
        IPUConfig().poplar_options = {}
    message = str(error.value)
    for candidate in (
        "convolutions.poplar_options",
        "matmuls.poplar_options",
        "pooling.poplar_options",
        "slices.poplar_options",
    ):
        assert f"'{candidate}'" in message


def test_setting_an_unknown_attribute_creates_nothing():
    config = IPUConfig()
    with pytest.raises(ValueError):
        config.new_option = 1
    assert "new_option" not in vars(config)
    assert "new_option" not in config.to_dict()


@pytest.mark.parametrize("category", ["io_tiles", "optimizations", "device_connection"])
def test_assigning_a_category_raises(category):
    config = IPUConfig()
    original = getattr(config, category)
    with pytest.raises(
        AttributeError, match=f"^{category} is a category and cannot be assigned to"
    ):
        setattr(config, category, {})
    assert getattr(config, category) is original


def test_assigning_a_nested_category_raises_with_its_full_name():
    config = IPUConfig()
    with pytest.raises(AttributeError, match="^optimizations.math is a category"):
        config.optimizations.math = True
    with pytest.raises(AttributeError, match="^norms.experimental is a category"):
        config.norms.experimental = None


@pytest.mark.parametrize(
    ("attr", "suggested"),
    [
        ("optimisations.math.fast", "optimizations.math.fast"),
        ("optimizations.math.fst", "optimizations.math.fast"),
        ("io_tiles.num_iotiles", "io_tiles.num_io_tiles"),
        ("selection_ordr", "selection_order"),
    ],
)
def test_get_attribute_metadata_with_a_bad_name(attr, suggested):
    with pytest.raises(ValueError, match=f"metadata for '{attr}'.*Did you mean .*'{suggested}'"):
        IPUConfig().get_attribute_metadata(attr)


@pytest.mark.parametrize("attr", ["", "optimizations.", ".math", "io_tiles.num_io_tiles.x"])
def test_get_attribute_metadata_with_a_malformed_name(attr):
    with pytest.raises(ValueError):
        IPUConfig().get_attribute_metadata(attr)


def test_get_attribute_metadata_needs_a_string():
    with pytest.raises(TypeError):
        IPUConfig().get_attribute_metadata(3)


def test_dir_lists_options_and_categories():
    names = dir(IPUConfig())
    assert "auto_select_ipus" in names
    assert "optimizations" in names
    assert "math" in dir(IPUConfig().optimizations)


def test_deepcopy_gives_an_independent_config():
    config = IPUConfig()
    config.auto_select_ipus = [1, 2]
    config.matmuls.poplar_options = {"availableMemoryProportion": "0.2"}
    duplicate = copy.deepcopy(config)
    assert duplicate == config
    assert duplicate is not config
    assert duplicate.optimizations is not config.optimizations

    duplicate.auto_select_ipus.append(3)
    duplicate.matmuls.poplar_options["x"] = "y"
    duplicate.optimizations.math.fast = True
    duplicate.io_tiles.num_io_tiles = 32
    assert config.auto_select_ipus == [1, 2]
    assert config.matmuls.poplar_options == {"availableMemoryProportion": "0.2"}
    assert config.optimizations.math.fast is False
    assert config.io_tiles.num_io_tiles == 0
    assert duplicate != config

    # Still type-checked after copying.
    with pytest.raises(TypeError):
        duplicate.io_tiles.num_io_tiles = "32"
    with pytest.raises(ValueError, match="Did you mean 'io_tiles.num_io_tiles'?"):
        duplicate.io_tiles.num_io_tile = 1


def test_repr_lists_every_option_and_str_shows_their_types():
    config = IPUConfig()
    config.auto_select_ipus = 2
    config.device_connection.type = config.device_connection.type.__class__.ON_DEMAND
    # The original's form: the class, then `  full.name = value` for each option.
    lines = repr(config).split("\n")
    assert lines[0] == "IPUConfig:"
    assert "  auto_select_ipus = 2" in lines
    assert "  device_connection.type = DeviceConnectionType.ON_DEMAND" in lines
    assert "  ipu_model.version = 'ipu2'" in lines
    assert len(lines) == 1 + 57
    text = str(config)
    assert (
        "auto_select_ipus: typing.Union[int, typing.List[int], typing.Tuple[int, ...]] = 2" in text
    )
    assert "scheduling.maximum_scheduler_search_space_size: int = 64" in text
    assert len(text.splitlines()) == 1 + 57


def test_equality():
    assert IPUConfig() == IPUConfig()
    changed = IPUConfig()
    changed.pooling.poplar_options = {"a": "b"}
    assert changed != IPUConfig()
    assert IPUConfig() != {}
