"""The `IpuOptions` protobuf: its wire format, its import paths and `IPUConfig._create_protobuf`.

References: hand-encoded protobuf wire bytes, the field declarations of the original's
config.proto (read from the mirror of its sources when present) and the values the original's
`_to_protobuf` methods (tensorflow/python/ipu/config.py) store for each attribute.
"""

from __future__ import annotations

import pathlib
import re
import subprocess

import pytest
from tensorflow.compiler.plugin.poplar.driver import config_pb2, option_flag_pb2, threestate_pb2
from tensorflow.compiler.plugin.poplar.driver.config_pb2 import IpuOptions

from openipu._src.config import (
    DeviceConnectionType,
    ExecutionProfileType,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)
from openipu._src.config.ipu_config import IPUConfig

_MIRROR = pathlib.Path("/work/.mirror/graphcore+tensorflow/repo")
_FIELD = re.compile(r"^\s*(repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;", re.MULTILINE)


@pytest.mark.parametrize(
    ("options", "wire"),
    [
        # Field 27 (creator_id), varint: tag 27 << 3 = 216 = 0xd8 0x01, then IPU_UTILS = 1.
        (IpuOptions(creator_id=config_pb2.IPU_UTILS), b"\xd8\x01\x01"),
        # Field 4 (device_config), length-delimited 0x22; inside, auto_count (field 1) = 2.
        (IpuOptions(device_config=[{"auto_count": 2}]), b"\x22\x02\x08\x02"),
        # cfg_index (field 2) is in a oneof: even 0 is present on the wire.
        (IpuOptions(device_config=[{"cfg_index": 0}]), b"\x22\x02\x10\x00"),
        # Field 42 (io_tile_available_memory_proportion), a double: tag 42 << 3 | 1 = 0x51 0x02.
        (IpuOptions(io_tile_available_memory_proportion=0.5), b"\xd1\x02" + bytes(6) + b"\xe0?"),
        # Field 1 (ipu_model_config) holding ipu_model_version (field 3) = "ipu2".
        (
            IpuOptions(ipu_model_config={"ipu_model_version": "ipu2"}),
            b"\x0a\x06\x1a\x04ipu2",
        ),
    ],
)
def test_wire_format_matches_hand_encoded_bytes(options, wire):
    assert options.SerializeToString() == wire
    assert IpuOptions.FromString(wire) == options


def _original_file(name: str) -> str:
    if not _MIRROR.exists():
        pytest.skip("no mirror of the original's sources on this machine")
    path = f"HEAD:tensorflow/compiler/plugin/poplar/driver/{name}"
    return subprocess.run(
        ["git", "--git-dir", str(_MIRROR), "show", path], capture_output=True, text=True, check=True
    ).stdout


def _declared_fields(descriptor) -> set[tuple[bool, str, str, int]]:
    fields = set()
    for field in descriptor.fields:
        if field.message_type is not None:
            type_name = field.message_type.name
        elif field.enum_type is not None:
            type_name = field.enum_type.name
        else:
            type_name = {8: "bool", 5: "int32", 3: "int64", 1: "double", 9: "string"}[field.type]
        fields.add((field.is_repeated, type_name, field.name, field.number))
    for nested in descriptor.nested_types:
        fields |= _declared_fields(nested)
    return fields


@pytest.mark.parametrize(
    ("proto_file", "module"),
    [("config.proto", config_pb2), ("option_flag.proto", option_flag_pb2)],
)
def test_fields_are_those_the_original_declares(proto_file, module):
    declared = {
        (bool(repeated), type_name, name, int(number))
        for repeated, type_name, name, number in _FIELD.findall(_original_file(proto_file))
    }
    ours: set[tuple[bool, str, str, int]] = set()
    for message in module.DESCRIPTOR.message_types_by_name.values():
        ours |= _declared_fields(message)
    assert ours == declared


def test_enums_are_those_the_original_declares():
    for proto_file, module in (("config.proto", config_pb2), ("threestate.proto", threestate_pb2)):
        text = _original_file(proto_file)
        for enum in module.DESCRIPTOR.enum_types_by_name.values():
            body = re.search(rf"enum {enum.name} \{{(.*?)\}}", text, re.DOTALL).group(1)
            declared = [(n, int(v)) for n, v in re.findall(r"(\w+)\s*=\s*(\d+);", body)]
            assert [(v.name, v.number) for v in enum.values] == declared


@pytest.mark.parametrize(
    ("ours", "proto_enum", "proto_names"),
    [
        # The original's enums take their values from these protobuf enums (its config.py).
        (DeviceConnectionType, config_pb2.IpuDeviceConnectionType, None),
        (ExecutionProfileType, config_pb2.IpuExecutionProfileType, None),
        (SchedulingAlgorithm, config_pb2.IpuSchedulingAlgorithm, None),
        (SelectionOrder, config_pb2.IpuSelectionOrder, None),
        (
            MergeRemoteBuffersBehaviour,
            threestate_pb2.ThreeState,
            ["THREESTATE_OFF", "THREESTATE_ON", "THREESTATE_UNDEFINED"],
        ),
        (
            StochasticRoundingBehaviour,
            config_pb2.StochasticRoundingBehaviour,
            [
                "StochasticRounding_Off",
                "StochasticRounding_On",
                "StochasticRounding_ReplicaIdenticalOnly",
            ],
        ),
    ],
)
def test_enum_values_are_the_protobuf_ones(ours, proto_enum, proto_names):
    names = proto_names or [member.name for member in ours]
    assert [member.value for member in ours] == [proto_enum.Value(name) for name in names]


def _configured() -> IPUConfig:
    config = IPUConfig()
    config.auto_select_ipus = [2, 4]
    config.selection_order = SelectionOrder.HOOF
    config.allow_recompute = True
    config.ipu_model.tiles_per_ipu = 8
    config.device_connection.type = DeviceConnectionType.PRE_COMPILE
    config.device_connection.version = "ipu21"
    config.floating_point_behaviour.set_all = True
    config.optimizations.enable_graph_outlining = False
    config.optimizations.merge_remote_buffers = MergeRemoteBuffersBehaviour.MERGE
    config.optimizations.enable_gather_simplifier = False
    config.scheduling.algorithm = SchedulingAlgorithm.LOOK_AHEAD
    config.matmuls.poplar_options = {"partialsType": "half", "availableMemoryProportion": "0.3"}
    config.io_tiles.num_io_tiles = 32
    config.io_tiles.available_memory_proportion = 0.25
    return config


def test_round_trip_through_the_wire_keeps_every_field():
    options = _configured()._create_protobuf()
    copy = IpuOptions.FromString(options.SerializeToString())
    assert copy == options
    assert copy != IPUConfig()._create_protobuf()


def test_defaults_convert_as_the_original():
    options = IPUConfig()._create_protobuf()
    assert options.creator_id == config_pb2.IpuOptionsCreator.IPU_UTILS
    assert len(options.device_config) == 0
    assert options.ipu_model_config.compile_ipu_code is True
    assert options.ipu_model_config.ipu_model_version == "ipu2"
    assert options.io_tile_available_memory_proportion == 0.9
    assert options.remote_buffer_merging_mode == threestate_pb2.THREESTATE_UNDEFINED
    assert options.minimum_remote_tensor_size == 128
    assert options.max_scheduler_lookahead_depth == 5
    assert options.experimental_distributed_batch_norm_replica_group_size == 1
    assert options.speed_size_config.disable_graph_outlining is False
    assert options.disable_gather_simplifier is False
    assert options.enable_dynamic_slice_replacement is True
    assert not options.HasField("profiling")


def test_attributes_convert_as_the_original():
    options = _configured()._create_protobuf()
    assert [(d.WhichOneof("selection"), d.auto_count) for d in options.device_config] == [
        ("auto_count", 2),
        ("auto_count", 4),
    ]
    assert options.selection_order == config_pb2.HOOF
    assert options.speed_size_config.allow_recompute is True
    assert options.ipu_model_config.tiles_per_ipu == 8
    assert options.device_connection_type == config_pb2.PRE_COMPILE == 3
    assert options.ipu_version == "ipu21"
    # set_all: every check on and stochastic rounding ON.
    fp = options.floating_point_behaviour
    assert (fp.inv, fp.div0, fp.oflo, fp.nanoo) == (True, True, True, True)
    assert fp.esr == config_pb2.StochasticRounding_On
    # The "enable" options are stored negated as "disable" fields.
    assert options.speed_size_config.disable_graph_outlining is True
    assert options.disable_gather_simplifier is True
    assert options.remote_buffer_merging_mode == threestate_pb2.THREESTATE_ON
    assert options.speed_size_config.scheduler_selection == config_pb2.LOOK_AHEAD
    assert [(f.option, f.value) for f in options.matmul_options] == [
        ("partialsType", "half"),
        ("availableMemoryProportion", "0.3"),
    ]
    assert options.num_io_tiles == 32
    assert options.io_tile_available_memory_proportion == 0.25


def test_select_ipus_becomes_cfg_index_entries():
    config = IPUConfig()
    config.select_ipus = [0, 16]
    options = config._create_protobuf()
    assert [(d.WhichOneof("selection"), d.cfg_index) for d in options.device_config] == [
        ("cfg_index", 0),
        ("cfg_index", 16),
    ]
