"""Deprecated options: warnings, and the new location set as the original did."""

import logging

import pytest

from openipu._src.config import IPUConfig, StochasticRoundingBehaviour


def deprecation_records(caplog):
    return [record for record in caplog.records if record.levelno == logging.WARNING]


def test_enable_fast_math_warns_and_sets_math_fast(caplog):
    config = IPUConfig()
    with caplog.at_level(logging.WARNING):
        config.optimizations.enable_fast_math = True
    assert config.optimizations.enable_fast_math is True
    assert config.optimizations.math.fast is True
    (record,) = deprecation_records(caplog)
    assert "enable_fast_math" in record.getMessage()
    assert "optimizations.math.fast" in record.getMessage()

    config.optimizations.enable_fast_math = False
    assert config.optimizations.math.fast is False


def test_math_fast_does_not_warn(caplog):
    config = IPUConfig()
    with caplog.at_level(logging.WARNING):
        config.optimizations.math.fast = True
    assert deprecation_records(caplog) == []
    assert config.optimizations.enable_fast_math is False


def test_enable_fast_math_is_still_type_checked():
    config = IPUConfig()
    with pytest.raises(TypeError, match="optimizations.enable_fast_math"):
        config.optimizations.enable_fast_math = 1
    assert config.optimizations.math.fast is False


def test_metadata_of_the_deprecated_option(caplog):
    metadata = IPUConfig().get_attribute_metadata("optimizations.enable_fast_math")
    assert metadata.deprecated is True
    assert "optimizations.math.fast" in metadata.deprecated_msg
    with caplog.at_level(logging.WARNING):
        metadata.warn_if_deprecated()
    assert len(deprecation_records(caplog)) == 1


def test_warn_if_deprecated_is_silent_for_current_options(caplog):
    with caplog.at_level(logging.WARNING):
        IPUConfig().get_attribute_metadata("optimizations.math.fast").warn_if_deprecated()
        IPUConfig().get_attribute_metadata("optimizations").warn_if_deprecated()
    assert deprecation_records(caplog) == []


@pytest.mark.parametrize(
    ("legacy", "expected"),
    [(True, StochasticRoundingBehaviour.ON), (False, StochasticRoundingBehaviour.OFF)],
)
def test_esr_accepts_a_bool_with_a_warning(caplog, legacy, expected):
    config = IPUConfig()
    config.floating_point_behaviour.esr = StochasticRoundingBehaviour.REPLICA_IDENTICAL_ONLY
    with caplog.at_level(logging.WARNING):
        config.floating_point_behaviour.esr = legacy
    assert config.floating_point_behaviour.esr is expected
    (record,) = deprecation_records(caplog)
    assert "floating_point_behaviour.esr" in record.getMessage()


def test_esr_metadata_keeps_the_documented_type():
    metadata = IPUConfig().get_attribute_metadata("floating_point_behaviour.esr")
    assert metadata.type == "StochasticRoundingBehaviour"
    with pytest.raises(TypeError):
        metadata.check_type(True)


def test_round_trip_of_defaults_does_not_warn(caplog):
    with caplog.at_level(logging.WARNING):
        IPUConfig().from_dict(IPUConfig().to_dict())
        IPUConfig().from_json(IPUConfig().to_json())
    assert deprecation_records(caplog) == []


def test_from_dict_gives_the_new_location_priority():
    config = IPUConfig()
    config.from_dict({"optimizations.math.fast": True, "optimizations.enable_fast_math": False})
    assert config.optimizations.math.fast is True
    assert config.optimizations.enable_fast_math is False
