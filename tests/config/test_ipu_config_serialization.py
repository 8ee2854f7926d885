"""to_dict / from_dict / to_json / from_json."""

import json

import pytest
from spec_ipu_config_table import SPEC_OPTIONS

from openipu._src.config import (
    DeviceConnectionType,
    IPUConfig,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)


def config_with_every_option_changed():
    config = IPUConfig()
    config.allow_recompute = True
    config.selection_order = SelectionOrder.HOOF
    config.serialization_output_folder = "/tmp/executables"
    config.compilation_poplar_options = {"opt.enableInlining": "false"}
    config.gcl_poplar_options = {"useSynclessCollectives": "true"}
    config.auto_select_ipus = [2, 2]
    config.select_ipus = []
    config.convolutions.poplar_options = {"availableMemoryProportion": "0.3"}
    config.device_connection.type = DeviceConnectionType.PRE_COMPILE
    config.device_connection.version = "ipu21"
    config.device_connection.enable_remote_buffers = True
    config.slices.poplar_options = {"usedForSlice": "true"}
    config.experimental.always_rearrange_copies_on_the_host = True
    config.experimental.enable_remote_buffer_embedding = True
    config.experimental.enable_prng_stability = True
    config.experimental.multi_replica_distribution.process_index = 1
    config.experimental.multi_replica_distribution.process_count = 4
    config.floating_point_behaviour.inv = True
    config.floating_point_behaviour.div0 = True
    config.floating_point_behaviour.oflo = True
    config.floating_point_behaviour.esr = StochasticRoundingBehaviour.REPLICA_IDENTICAL_ONLY
    config.floating_point_behaviour.nanoo = True
    config.floating_point_behaviour.set_all = True
    config.io_tiles.num_io_tiles = 64
    config.io_tiles.place_ops_on_io_tiles = True
    config.io_tiles.available_memory_proportion = 0.75
    config.ipu_model.compile_ipu_code = False
    config.ipu_model.tiles_per_ipu = 4
    config.ipu_model.version = "ipu1"
    config.matmuls.clear_pass_type = True
    config.matmuls.poplar_options = {"partialsType": "half"}
    config.norms.use_stable_statistics = True
    config.norms.experimental.distributed_batch_norm_replica_group_size = 2
    config.optimizations.math.dot_strength = False
    config.optimizations.prefetch_data_streams = False
    config.optimizations.combine_embedding_lookups = True
    config.optimizations.combine_matmuls = True
    config.optimizations.enable_graph_outlining = False
    config.optimizations.merge_infeed_io_copies = False
    config.optimizations.maximum_cross_replica_sum_buffer_size = 1
    config.optimizations.maximum_reduce_scatter_buffer_size = 2
    config.optimizations.maximum_inter_ipu_copies_buffer_size = 3
    config.optimizations.maximum_send_recv_cluster_size = 4
    config.optimizations.maximum_reduce_many_buffer_size = 5
    config.optimizations.maximum_all_gather_buffer_size = 6
    config.optimizations.minimum_remote_tensor_size = 7
    config.optimizations.merge_remote_buffers = MergeRemoteBuffersBehaviour.MERGE
    config.optimizations.enable_gather_simplifier = False
    config.optimizations.triangular_solve_expander_block_size = 8
    config.optimizations.cholesky_block_size = 9
    config.optimizations.enable_dynamic_slice_replacement = False
    config.pooling.poplar_options = {"poolUseIntrospectiveMapping": "false"}
    config.scheduling.algorithm = SchedulingAlgorithm.LOOK_AHEAD
    config.scheduling.maximum_scheduler_lookahead_depth = 10
    config.scheduling.maximum_scheduler_search_space_size = 11
    # Deprecated (also sets math.fast), then math.fast set back: both must survive a round trip.
    config.optimizations.enable_fast_math = True
    config.optimizations.math.fast = False
    return config


def test_the_fixture_changes_every_option_but_select_ipus():
    changed = config_with_every_option_changed().to_dict()
    defaults = {name: default for name, _, default in SPEC_OPTIONS}
    unchanged = {name for name in defaults if changed[name] == defaults[name]}
    # select_ipus must stay empty while auto_select_ipus is set.
    assert unchanged == {"select_ipus", "optimizations.math.fast"}


def test_to_dict_has_full_dotted_names_and_values():
    config = config_with_every_option_changed()
    dct = config.to_dict()
    assert len(dct) == 57
    assert dct["auto_select_ipus"] == [2, 2]
    # Enum members as their values, as the original writes them.
    assert dct["device_connection.type"] == DeviceConnectionType.PRE_COMPILE.value
    assert dct["experimental.multi_replica_distribution.process_count"] == 4
    assert dct["optimizations.enable_fast_math"] is True
    assert dct["optimizations.math.fast"] is False


def test_to_dict_returns_copies():
    config = IPUConfig()
    dct = config.to_dict()
    dct["auto_select_ipus"].append(1)
    dct["matmuls.poplar_options"]["x"] = "y"
    assert config.auto_select_ipus == []
    assert config.matmuls.poplar_options == {}


def test_dict_round_trip():
    config = config_with_every_option_changed()
    restored = IPUConfig()
    restored.from_dict(config.to_dict())
    assert restored.to_dict() == config.to_dict()
    assert restored == config
    assert restored.optimizations.enable_fast_math is True
    assert restored.optimizations.math.fast is False


def test_json_round_trip():
    config = config_with_every_option_changed()
    restored = IPUConfig()
    restored.from_json(config.to_json())
    assert restored.to_dict() == config.to_dict()
    assert restored.floating_point_behaviour.esr is (
        StochasticRoundingBehaviour.REPLICA_IDENTICAL_ONLY
    )
    assert restored.io_tiles.available_memory_proportion == 0.75


def test_json_round_trip_of_defaults():
    restored = IPUConfig()
    restored.from_json(IPUConfig().to_json())
    assert restored == IPUConfig()


def test_json_is_plain_json_with_enum_values():
    data = json.loads(config_with_every_option_changed().to_json())
    assert data["selection_order"] == SelectionOrder.HOOF.value
    assert data["device_connection.type"] == DeviceConnectionType.PRE_COMPILE.value
    assert data["optimizations.merge_remote_buffers"] == MergeRemoteBuffersBehaviour.MERGE.value
    assert data["scheduling.algorithm"] == SchedulingAlgorithm.LOOK_AHEAD.value
    assert data["matmuls.poplar_options"] == {"partialsType": "half"}


def test_json_tuples_come_back_as_lists():
    config = IPUConfig()
    config.auto_select_ipus = (1, 2)
    restored = IPUConfig()
    restored.from_json(config.to_json())
    assert restored.auto_select_ipus == [1, 2]


def test_from_json_accepts_qualified_enum_names():
    config = IPUConfig()
    config.from_json('{"selection_order": "SelectionOrder.SNAKE"}')
    assert config.selection_order is SelectionOrder.SNAKE


def test_from_json_rejects_an_unknown_enum_name():
    config = IPUConfig()
    with pytest.raises(TypeError, match="selection_order.*'SNAKES'.*SelectionOrder"):
        config.from_json('{"selection_order": "SNAKES"}')


def test_from_dict_updates_only_the_named_options():
    config = IPUConfig()
    config.allow_recompute = True
    config.from_dict({"auto_select_ipus": 4, "io_tiles.num_io_tiles": 16})
    assert config.allow_recompute is True
    assert config.auto_select_ipus == 4
    assert config.io_tiles.num_io_tiles == 16


def test_from_dict_accepts_nested_categories():
    config = IPUConfig()
    config.from_dict(
        {
            "optimizations": {"math": {"fast": True}, "combine_matmuls": True},
            "matmuls": {"poplar_options": {"availableMemoryProportion": "0.1"}},
            "io_tiles.num_io_tiles": 8,
        }
    )
    assert config.optimizations.math.fast is True
    assert config.optimizations.combine_matmuls is True
    assert config.matmuls.poplar_options == {"availableMemoryProportion": "0.1"}
    assert config.io_tiles.num_io_tiles == 8


def test_from_dict_ignores_names_that_are_not_options():
    # The original's from_dict (tensorflow/python/ipu/config.py) looks each option's full
    # name up in the dict: other keys (misspelt names, categories, non-str keys) are not read.
    config = IPUConfig()
    config.from_dict(
        {"io_tiles.num_io_tile": 8, "io_tiles": 8, 3: 1, "auto_select_ipus": 2, "nothing": {}}
    )
    expected = IPUConfig()
    expected.auto_select_ipus = 2
    assert config.to_dict() == expected.to_dict()


def test_from_dict_is_all_or_nothing():
    config = IPUConfig()
    with pytest.raises(TypeError, match="io_tiles.num_io_tiles"):
        config.from_dict({"auto_select_ipus": 4, "io_tiles.num_io_tiles": "8"})
    assert config == IPUConfig()


def test_from_dict_of_a_sequence_sets_nothing_and_of_a_number_fails_as_the_original():
    # The original only tests `name in dct`: a list holds no option name; an int has no `in`.
    config = IPUConfig()
    config.from_dict([("auto_select_ipus", 1)])
    config.from_json("[1, 2]")
    assert config.to_dict() == IPUConfig().to_dict()
    with pytest.raises(TypeError) as stock:
        _ = "auto_select_ipus" in 3  # type: ignore[operator]
    with pytest.raises(type(stock.value), match="not iterable"):
        IPUConfig().from_json("3")
