"""`IpuOptions`: an `IPUConfig` converted into the protobuf the original's backend receives, and back.

The original converts its `IPUConfig` into the `IpuOptions` protobuf of its Poplar backend
(`IPUConfig._create_protobuf` and the `_to_protobuf` method of each category,
tensorflow/python/ipu/config.py; fields in tensorflow/compiler/plugin/poplar/driver/config.proto)
and checks the rules that involve several options while doing so. Its `configure_ipu_system`
also takes such a protobuf directly, which here is converted back into the `IPUConfig` the
emulated system runs with. Both directions follow one table, `BINDINGS`, of which option
fills which field. Enum fields hold the values of the original's protobuf enums, which
`enums.py` gives its enums.
"""

import copy
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from openipu._src.config.enums import StochasticRoundingBehaviour
from openipu._src.config.ipu_options_proto import IpuOptions, IpuOptionsCreator
from openipu._src.config.validation import validate_ipu_config

if TYPE_CHECKING:
    from openipu._src.config.ipu_config import IPUConfig


@dataclasses.dataclass(frozen=True)
class Codec:
    """How an option's value becomes a field's value (`encode`) and back (`decode`, which
    also gets the option's default, to know its enum class)."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any, Any], Any]


#: The same value on both sides (bools, ints, floats, strings).
PLAIN = Codec(encode=lambda value: value, decode=lambda value, default: value)
#: A bool the field holds inverted (`disable_X` fields for `enable_X` options).
NEGATED = Codec(encode=lambda value: not value, decode=lambda value, default: not value)
#: An enum option: the field holds its value, the number of the protobuf enum.
ENUM = Codec(encode=lambda value: value.value, decode=lambda value, default: type(default)(value))
#: A dict of Poplar options: repeated `PoplarOptionFlag`s in the dict's order, values as
#: strings (`_poplar_options_to_protobuf`).
FLAGS = Codec(
    encode=lambda value: [{"option": str(k), "value": str(v)} for k, v in value.items()],
    decode=lambda value, default: {flag.option: flag.value for flag in value},
)


@dataclasses.dataclass(frozen=True)
class Binding:
    """The `IpuOptions` field (dotted path) that holds an `IPUConfig` option (dotted name)."""

    field: str
    option: str
    codec: Codec = PLAIN


#: Every option the protobuf holds, except the device selections (`auto_select_ipus`,
#: `select_ipus`: one repeated oneof field for both) and `floating_point_behaviour.set_all`
#: (which sets the others, see `_with_set_all_applied`).
BINDINGS: tuple[Binding, ...] = (
    Binding("selection_order", "selection_order", ENUM),
    Binding("serialization_folder", "serialization_output_folder"),
    Binding("speed_size_config.allow_recompute", "allow_recompute"),
    Binding(
        "speed_size_config.always_rearrange_copies_on_the_host",
        "experimental.always_rearrange_copies_on_the_host",
    ),
    Binding(
        "speed_size_config.disable_graph_outlining",
        "optimizations.enable_graph_outlining",
        NEGATED,
    ),
    Binding("speed_size_config.merge_infeed_io_copies", "optimizations.merge_infeed_io_copies"),
    Binding("speed_size_config.scheduler_selection", "scheduling.algorithm", ENUM),
    Binding("floating_point_behaviour.inv", "floating_point_behaviour.inv"),
    Binding("floating_point_behaviour.div0", "floating_point_behaviour.div0"),
    Binding("floating_point_behaviour.oflo", "floating_point_behaviour.oflo"),
    Binding("floating_point_behaviour.esr", "floating_point_behaviour.esr", ENUM),
    Binding("floating_point_behaviour.nanoo", "floating_point_behaviour.nanoo"),
    Binding("ipu_model_config.compile_ipu_code", "ipu_model.compile_ipu_code"),
    Binding("ipu_model_config.tiles_per_ipu", "ipu_model.tiles_per_ipu"),
    Binding("ipu_model_config.ipu_model_version", "ipu_model.version"),
    Binding("algebraic_simplifier_config.enable_fast_math", "optimizations.math.fast"),
    Binding("algebraic_simplifier_config.enable_dot_strength", "optimizations.math.dot_strength"),
    Binding("compilation_options", "compilation_poplar_options", FLAGS),
    Binding("gcl_options", "gcl_poplar_options", FLAGS),
    Binding("convolution_options", "convolutions.poplar_options", FLAGS),
    Binding("matmul_options", "matmuls.poplar_options", FLAGS),
    Binding("pooling_options", "pooling.poplar_options", FLAGS),
    Binding("slice_options", "slices.poplar_options", FLAGS),
    Binding("ipu_version", "device_connection.version"),
    Binding("device_connection_type", "device_connection.type", ENUM),
    Binding("enable_remote_buffers_without_device", "device_connection.enable_remote_buffers"),
    Binding(
        "enable_experimental_remote_buffer_embedding",
        "experimental.enable_remote_buffer_embedding",
    ),
    Binding("enable_experimental_prng_stability", "experimental.enable_prng_stability"),
    Binding("multi_replica_process_index", "experimental.multi_replica_distribution.process_index"),
    Binding("multi_replica_process_count", "experimental.multi_replica_distribution.process_count"),
    Binding("num_io_tiles", "io_tiles.num_io_tiles"),
    Binding("place_ops_on_io_tiles", "io_tiles.place_ops_on_io_tiles"),
    Binding("io_tile_available_memory_proportion", "io_tiles.available_memory_proportion"),
    Binding("clear_matmul_pass_type", "matmuls.clear_pass_type"),
    Binding("use_stable_norm_statistics", "norms.use_stable_statistics"),
    Binding(
        "experimental_distributed_batch_norm_replica_group_size",
        "norms.experimental.distributed_batch_norm_replica_group_size",
    ),
    Binding("prefetch_data_streams", "optimizations.prefetch_data_streams"),
    Binding("enable_multi_slice_combiner", "optimizations.combine_embedding_lookups"),
    Binding("enable_matmul_combiner", "optimizations.combine_matmuls"),
    Binding(
        "max_cross_replica_sum_buffer_size", "optimizations.maximum_cross_replica_sum_buffer_size"
    ),
    Binding("max_reduce_scatter_buffer_size", "optimizations.maximum_reduce_scatter_buffer_size"),
    Binding("max_reduce_many_buffer_size", "optimizations.maximum_reduce_many_buffer_size"),
    Binding("max_all_gather_buffer_size", "optimizations.maximum_all_gather_buffer_size"),
    Binding(
        "max_inter_ipu_copies_buffer_size", "optimizations.maximum_inter_ipu_copies_buffer_size"
    ),
    Binding("max_send_recv_cluster_size", "optimizations.maximum_send_recv_cluster_size"),
    Binding("minimum_remote_tensor_size", "optimizations.minimum_remote_tensor_size"),
    Binding("remote_buffer_merging_mode", "optimizations.merge_remote_buffers", ENUM),
    Binding("disable_gather_simplifier", "optimizations.enable_gather_simplifier", NEGATED),
    Binding(
        "triangular_solve_expander_block_size", "optimizations.triangular_solve_expander_block_size"
    ),
    Binding("cholesky_block_size", "optimizations.cholesky_block_size"),
    Binding("enable_fast_math", "optimizations.enable_fast_math"),
    Binding("enable_dynamic_slice_replacement", "optimizations.enable_dynamic_slice_replacement"),
    Binding("max_scheduler_lookahead_depth", "scheduling.maximum_scheduler_lookahead_depth"),
    Binding("max_scheduler_search_space_size", "scheduling.maximum_scheduler_search_space_size"),
)

_FP_CHECKS = ("inv", "div0", "oflo", "nanoo")


def _as_list(selection: int | list[int] | tuple[int, ...]) -> list[int]:
    return [selection] if isinstance(selection, int) else list(selection)


def _option_value(config: "IPUConfig", dotted_name: str) -> Any:
    category, name = config._resolve(dotted_name)
    return getattr(category, name)


def _with_set_all_applied(config: "IPUConfig") -> "IPUConfig":
    """`config`, or a copy with what `floating_point_behaviour.set_all` turns on (every check
    and stochastic rounding) set on the options themselves, as the protobuf holds it."""
    if not config.floating_point_behaviour.set_all:
        return config
    applied = copy.deepcopy(config)
    fp = applied.floating_point_behaviour
    for check in _FP_CHECKS:
        setattr(fp, check, True)
    fp.esr = StochasticRoundingBehaviour.ON
    fp.set_all = False
    return applied


def _set_field(options: Message, path: str, value: Any) -> None:
    *parents, name = path.split(".")
    message = options
    for parent in parents:
        message = getattr(message, parent)
    if isinstance(value, list):
        field = getattr(message, name)
        for entry in value:
            field.add(**entry)
    else:
        # Setting a field of a nested message makes that message present, default or not,
        # as the original's assignments do.
        setattr(message, name, value)


def _get_field(options: Message, path: str) -> Any:
    value = options
    for name in path.split("."):
        value = getattr(value, name)
    return value


def ipu_options_from_config(config: "IPUConfig") -> Message:
    """The `IpuOptions` protobuf of `config`; raises the ValueError of `IPUConfig.validate` for
    a config that breaks a rule, as the original's conversion does."""
    validate_ipu_config(config)
    applied = _with_set_all_applied(config)
    options: Message = IpuOptions(
        creator_id=IpuOptionsCreator.IPU_UTILS,
        # One device per selection entry, the `select_ipus` ones first (only one of the two may
        # be set).
        device_config=[{"cfg_index": i} for i in _as_list(config.select_ipus)]
        + [{"auto_count": n} for n in _as_list(config.auto_select_ipus)],
    )
    for binding in BINDINGS:
        value = _option_value(applied, binding.option)
        _set_field(options, binding.field, binding.codec.encode(value))
    return options


def config_from_ipu_options(options: Message) -> "IPUConfig":
    """The `IPUConfig` whose `_create_protobuf()` is `options` (for the fields an `IPUConfig`
    has): what the emulated system runs with when configured with the protobuf itself."""
    # Imported here: ipu_config imports this module.
    from openipu._src.config.ipu_config import IPUConfig

    config = IPUConfig()
    by_index = [
        d.cfg_index for d in options.device_config if d.WhichOneof("selection") == "cfg_index"
    ]
    # An entry with neither set reads as auto_count 0, as the original's backend reads it.
    by_count = [
        d.auto_count for d in options.device_config if d.WhichOneof("selection") != "cfg_index"
    ]
    if by_index and by_count:
        # The original's backend would take a mix per device; an IPUConfig holds one kind only.
        raise ValueError(
            f"IpuOptions.device_config mixes cfg_index entries {by_index} with auto_count "
            f"entries {by_count}: the emulated system takes devices of one kind only (as "
            "IPUConfig.select_ipus or IPUConfig.auto_select_ipus)"
        )
    config.select_ipus = by_index
    config.auto_select_ipus = by_count
    # Deprecated options first: one sets the option that replaced it, whose own field then
    # wins. Values straight from the protobuf: no deprecation warnings for them.
    ordered = sorted(BINDINGS, key=lambda binding: not config._is_deprecated(binding.option))
    for binding in ordered:
        category, option = config._resolve_option(binding.option)
        value = binding.codec.decode(_get_field(options, binding.field), option.default)
        category._set_option(option, value, warn_if_deprecated=False)
    return config
