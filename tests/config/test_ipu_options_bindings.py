"""The table of which `IPUConfig` option fills which `IpuOptions` field, read both ways.

References: the option names of `IPUConfig` itself, the fields of the protobuf's
descriptor, and the protobuf a config converts to (compared field by field and on the wire).
"""

from __future__ import annotations

import pytest
from tensorflow.compiler.plugin.poplar.driver.config_pb2 import IpuOptions
from test_ipu_config_serialization import config_with_every_option_changed

from openipu._src.config import StochasticRoundingBehaviour
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.config.ipu_options import BINDINGS, config_from_ipu_options

#: Options the table leaves to hand-written code: the device selections share one repeated
#: oneof field; `set_all` turns the others on.
_NOT_IN_TABLE = {"auto_select_ipus", "select_ipus", "floating_point_behaviour.set_all"}
#: Fields no `IPUConfig` option fills (the original's `_to_protobuf` leaves them unset), and
#: the two the conversion fills itself.
_UNFILLED = {"profiling", "deprecated", "creator_id", "device_config"}


def _leaf_fields(descriptor, prefix=""):
    for field in descriptor.fields:
        name = prefix + field.name
        nested = field.message_type
        if nested is not None and not field.is_repeated:
            yield from _leaf_fields(nested, name + ".")
        else:
            yield name


def test_every_option_has_one_field():
    options = {name for name, _, _ in IPUConfig()._iter_options()}
    bound = [binding.option for binding in BINDINGS]
    assert len(bound) == len(set(bound))
    assert set(bound) == options - _NOT_IN_TABLE


def test_every_field_but_the_unfilled_has_one_option():
    fields = set(_leaf_fields(IpuOptions.DESCRIPTOR))
    bound = [binding.field for binding in BINDINGS]
    assert len(bound) == len(set(bound))
    unfilled = {f for f in fields if f.split(".")[0] in _UNFILLED}
    assert set(bound) == fields - unfilled


def _changed_config() -> IPUConfig:
    """Every option away from its default, as far as one config can be converted."""
    config = config_with_every_option_changed()
    # Not read back: the protobuf holds what it sets (see below).
    config.floating_point_behaviour.set_all = False
    # Not allowed with I/O tiles.
    config.norms.experimental.distributed_batch_norm_replica_group_size = 1
    return config


def _by_index_config() -> IPUConfig:
    config = IPUConfig()
    config.select_ipus = [3, 5]
    return config


@pytest.mark.parametrize(
    "config",
    [IPUConfig(), _changed_config(), _by_index_config()],
    ids=["default", "changed", "by-index"],
)
def test_protobuf_to_config_is_the_inverse(config):
    options = config._create_protobuf()
    back = config_from_ipu_options(options)
    assert back == config
    assert back._create_protobuf() == options
    assert back._create_protobuf().SerializeToString() == options.SerializeToString()


def test_auto_select_and_deprecated_fast_math_read_back(caplog):
    config = IPUConfig()
    config.auto_select_ipus = [1, 2]
    config.optimizations.math.fast = True
    back = config_from_ipu_options(config._create_protobuf())
    assert list(back.auto_select_ipus) == [1, 2] and list(back.select_ipus) == []
    # The replaced option keeps its own value; the new one its own.
    assert back.optimizations.math.fast and not back.optimizations.enable_fast_math
    assert "deprecated" not in caplog.text


def test_set_all_reads_back_as_the_options_it_sets():
    config = IPUConfig()
    config.floating_point_behaviour.set_all = True
    options = config._create_protobuf()
    fp = config_from_ipu_options(options).floating_point_behaviour
    assert (fp.inv, fp.div0, fp.oflo, fp.nanoo, fp.set_all) == (True, True, True, True, False)
    assert fp.esr == StochasticRoundingBehaviour.ON
    assert config_from_ipu_options(options)._create_protobuf() == options


def test_a_mix_of_device_kinds_names_both():
    options = IPUConfig()._create_protobuf()
    options.device_config.add(cfg_index=3)
    options.device_config.add(auto_count=2)
    with pytest.raises(ValueError, match=r"cfg_index entries \[3\] with auto_count entries \[2\]"):
        config_from_ipu_options(options)
