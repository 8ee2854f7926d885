"""The wire format of the original's `IpuOptions` protobuf, as a declarative table.

The original declares it in three proto3 files of its Poplar backend
(tensorflow/compiler/plugin/poplar/driver/config.proto, option_flag.proto and
threestate.proto, package `xla.poplarplugin`). This table restates their facts that decide
compatibility: message, enum and field names, field numbers, types, labels and oneofs;
`ipu_options_proto` turns it into descriptors and message classes, so that no protoc is
needed. Field numbers the original retired are simply absent, as in its files.
"""

import dataclasses

PACKAGE = "xla.poplarplugin"

#: The proto3 scalar types the files use.
SCALAR_TYPES = ("bool", "int32", "int64", "double", "string")


@dataclasses.dataclass(frozen=True)
class Field:
    """One field: `type` is a scalar type or a message/enum named relative to the package
    (a nested message as `Outer.Inner`)."""

    name: str
    number: int
    type: str
    repeated: bool = False
    oneof: str | None = None


@dataclasses.dataclass(frozen=True)
class Message:
    name: str
    fields: tuple[Field, ...]
    nested: tuple["Message", ...] = ()


@dataclasses.dataclass(frozen=True)
class Enum:
    name: str
    values: tuple[tuple[str, int], ...]


@dataclasses.dataclass(frozen=True)
class ProtoFile:
    path: str
    dependencies: tuple[str, ...] = ()
    enums: tuple[Enum, ...] = ()
    messages: tuple[Message, ...] = ()


_DRIVER = "tensorflow/compiler/plugin/poplar/driver/"

OPTION_FLAG_FILE = ProtoFile(
    path=_DRIVER + "option_flag.proto",
    messages=(
        Message("PoplarOptionFlag", (Field("option", 1, "string"), Field("value", 2, "string"))),
        Message("PoplarOptionFlags", (Field("flags", 1, "PoplarOptionFlag", repeated=True),)),
    ),
)

THREESTATE_FILE = ProtoFile(
    path=_DRIVER + "threestate.proto",
    enums=(
        Enum(
            "ThreeState",
            (("THREESTATE_OFF", 0), ("THREESTATE_ON", 1), ("THREESTATE_UNDEFINED", 2)),
        ),
    ),
)

_FLAG = "PoplarOptionFlag"

_IPU_OPTIONS = Message(
    "IpuOptions",
    nested=(
        Message(
            "IpuModelConfig",
            (
                Field("compile_ipu_code", 1, "bool"),
                Field("tiles_per_ipu", 2, "int64"),
                Field("ipu_model_version", 3, "string"),
            ),
        ),
        Message(
            "Profiling",
            (
                Field("enable_compilation_trace", 1, "bool"),
                Field("enable_poplar_reports_text", 2, "bool"),
                Field("enable_io_trace", 3, "bool"),
                Field("execution_trace_type", 4, "IpuExecutionProfileType"),
                Field("report_every_nth_execution", 5, "int64"),
                Field("enable_ipu_trace_events", 7, "bool"),
                Field("enable_poplar_reports_cbor", 8, "bool"),
                Field("report_directory", 9, "string"),
                Field("max_report_size", 10, "int64"),
                Field("graph_options", 11, _FLAG, repeated=True),
                Field("enable_poplar_graph", 13, "bool"),
            ),
        ),
        Message(
            "DeviceConfig",
            (
                Field("auto_count", 1, "int32", oneof="selection"),
                Field("cfg_index", 2, "int32", oneof="selection"),
            ),
        ),
        Message(
            "SpeedSizeConfig",
            (
                Field("always_rearrange_copies_on_the_host", 1, "bool"),
                Field("disable_graph_outlining", 3, "bool"),
                Field("allow_recompute", 4, "bool"),
                Field("merge_infeed_io_copies", 6, "bool"),
                Field("scheduler_selection", 7, "IpuSchedulingAlgorithm"),
            ),
        ),
        Message(
            "FloatingPointBehaviour",
            (
                Field("inv", 2, "bool"),
                Field("div0", 3, "bool"),
                Field("oflo", 4, "bool"),
                Field("esr", 5, "StochasticRoundingBehaviour"),
                Field("nanoo", 6, "bool"),
            ),
        ),
        Message(
            "IpuAlgebraicSimplifierConfig",
            (Field("enable_fast_math", 1, "bool"), Field("enable_dot_strength", 2, "bool")),
        ),
    ),
    fields=(
        Field("ipu_model_config", 1, "IpuOptions.IpuModelConfig"),
        Field("profiling", 2, "IpuOptions.Profiling"),
        Field("compilation_options", 3, _FLAG, repeated=True),
        Field("device_config", 4, "IpuOptions.DeviceConfig", repeated=True),
        Field("speed_size_config", 5, "IpuOptions.SpeedSizeConfig"),
        Field("convolution_options", 6, _FLAG, repeated=True),
        Field("matmul_options", 7, _FLAG, repeated=True),
        Field("pooling_options", 8, _FLAG, repeated=True),
        Field("clear_matmul_pass_type", 9, "bool"),
        Field("deprecated", 10, "bool"),
        Field("max_cross_replica_sum_buffer_size", 11, "int64"),
        Field("max_reduce_scatter_buffer_size", 12, "int64"),
        Field("floating_point_behaviour", 13, "IpuOptions.FloatingPointBehaviour"),
        Field("max_inter_ipu_copies_buffer_size", 14, "int64"),
        Field("max_send_recv_cluster_size", 15, "int64"),
        Field("max_scheduler_lookahead_depth", 16, "int64"),
        Field("max_scheduler_search_space_size", 17, "int64"),
        Field("prefetch_data_streams", 18, "bool"),
        Field("enable_multi_slice_combiner", 19, "bool"),
        Field("enable_matmul_combiner", 20, "bool"),
        Field("selection_order", 21, "IpuSelectionOrder"),
        Field("disable_gather_simplifier", 22, "bool"),
        Field("serialization_folder", 23, "string"),
        Field("device_connection_type", 24, "IpuDeviceConnectionType"),
        Field("ipu_version", 25, "string"),
        Field("creator_id", 27, "IpuOptionsCreator"),
        Field("use_stable_norm_statistics", 28, "bool"),
        Field("num_io_tiles", 29, "int64"),
        Field("gcl_options", 30, _FLAG, repeated=True),
        Field("triangular_solve_expander_block_size", 31, "int64"),
        Field("enable_experimental_remote_buffer_embedding", 32, "bool"),
        Field("enable_fast_math", 33, "bool"),
        Field("multi_replica_process_count", 34, "int64"),
        Field("multi_replica_process_index", 35, "int64"),
        Field("minimum_remote_tensor_size", 36, "int64"),
        Field("place_ops_on_io_tiles", 37, "bool"),
        Field("enable_remote_buffers_without_device", 38, "bool"),
        Field("remote_buffer_merging_mode", 39, "ThreeState"),
        Field("cholesky_block_size", 40, "int64"),
        Field("experimental_distributed_batch_norm_replica_group_size", 41, "int64"),
        Field("io_tile_available_memory_proportion", 42, "double"),
        Field("slice_options", 43, _FLAG, repeated=True),
        Field("max_reduce_many_buffer_size", 44, "int64"),
        Field("algebraic_simplifier_config", 45, "IpuOptions.IpuAlgebraicSimplifierConfig"),
        Field("enable_experimental_prng_stability", 46, "bool"),
        Field("max_all_gather_buffer_size", 47, "int64"),
        Field("enable_dynamic_slice_replacement", 48, "bool"),
    ),
)

CONFIG_FILE = ProtoFile(
    path=_DRIVER + "config.proto",
    dependencies=(OPTION_FLAG_FILE.path, THREESTATE_FILE.path),
    enums=(
        Enum("IpuSelectionOrder", (("AUTO", 0), ("ZIGZAG", 1), ("SNAKE", 2), ("HOOF", 3))),
        Enum(
            "IpuDeviceConnectionType",
            (("ALWAYS", 0), ("ON_DEMAND", 1), ("NEVER", 2), ("PRE_COMPILE", 3)),
        ),
        Enum("IpuOptionsCreator", (("INVALID", 0), ("IPU_UTILS", 1))),
        Enum(
            "IpuExecutionProfileType",
            (("NO_PROFILE", 0), ("DEVICE_PROFILE", 1), ("IPU_PROFILE", 2), ("TILE_PROFILE", 3)),
        ),
        Enum(
            "IpuSchedulingAlgorithm",
            (
                ("CHOOSE_BEST", 0),
                ("CLUSTERING", 1),
                ("POST_ORDER", 2),
                ("LOOK_AHEAD", 3),
                ("SHORTEST_PATH", 4),
            ),
        ),
        Enum(
            "SyntheticDataCategory",
            (
                ("Seed", 0),
                ("Infeed", 1),
                ("Outfeed", 2),
                ("HostEmbedding", 3),
                ("Parameters", 4),
                ("Unknown", 5),
            ),
        ),
        Enum(
            "StochasticRoundingBehaviour",
            (
                ("StochasticRounding_Off", 0),
                ("StochasticRounding_On", 1),
                ("StochasticRounding_ReplicaIdenticalOnly", 2),
            ),
        ),
    ),
    messages=(_IPU_OPTIONS,),
)

#: In dependency order: a file comes after those it imports.
FILES = (OPTION_FLAG_FILE, THREESTATE_FILE, CONFIG_FILE)
