"""`IpuOptions`: an `IPUConfig` flattened into the options record the original's backend read.

The original converts its `IPUConfig` into the `IpuOptions` protobuf of its Poplar backend
(`IPUConfig._create_protobuf`, tensorflow/python/ipu/config.py; fields in
tensorflow/compiler/plugin/poplar/driver/config.proto) and checks the rules that involve
several options while doing so. Programs and tests read that record's fields; here it is a
plain record with the same field names, enum fields holding the enums' integer values.
"""

import dataclasses
from typing import TYPE_CHECKING

from openipu._src.config.validation import validate_ipu_config

if TYPE_CHECKING:
    from openipu._src.config.ipu_config import IPUConfig

# config.proto's IpuOptionsCreator.IPU_UTILS: the record was made from an IPUConfig.
CREATOR_IPU_UTILS = 1


@dataclasses.dataclass
class OptionFlag:
    """One Poplar/PopLibs option: its name and value."""

    option: str
    value: str


@dataclasses.dataclass
class DeviceConfig:
    """One TensorFlow IPU device: a number of IPUs to pick (`auto_count`) or a configuration
    index (`cfg_index`)."""

    auto_count: int = 0
    cfg_index: int = 0


@dataclasses.dataclass
class SpeedSizeConfig:
    allow_recompute: bool = False
    always_rearrange_copies_on_the_host: bool = False
    disable_graph_outlining: bool = False
    merge_infeed_io_copies: bool = False
    scheduler_selection: int = 0


@dataclasses.dataclass
class FloatingPointBehaviour:
    inv: bool = False
    div0: bool = False
    oflo: bool = False
    esr: int = 0
    nanoo: bool = False


@dataclasses.dataclass
class IpuModelConfig:
    compile_ipu_code: bool = False
    tiles_per_ipu: int = 0
    ipu_model_version: str = ""


@dataclasses.dataclass
class AlgebraicSimplifierConfig:
    enable_fast_math: bool = False
    enable_dot_strength: bool = False


@dataclasses.dataclass
class IpuOptions:
    """The options of the IPU system, as the original's backend received them."""

    creator_id: int = 0
    device_config: list[DeviceConfig] = dataclasses.field(default_factory=list)
    selection_order: int = 0
    serialization_folder: str = ""
    speed_size_config: SpeedSizeConfig = dataclasses.field(default_factory=SpeedSizeConfig)
    floating_point_behaviour: FloatingPointBehaviour = dataclasses.field(
        default_factory=FloatingPointBehaviour
    )
    ipu_model_config: IpuModelConfig = dataclasses.field(default_factory=IpuModelConfig)
    algebraic_simplifier_config: AlgebraicSimplifierConfig = dataclasses.field(
        default_factory=AlgebraicSimplifierConfig
    )
    compilation_options: list[OptionFlag] = dataclasses.field(default_factory=list)
    gcl_options: list[OptionFlag] = dataclasses.field(default_factory=list)
    convolution_options: list[OptionFlag] = dataclasses.field(default_factory=list)
    matmul_options: list[OptionFlag] = dataclasses.field(default_factory=list)
    pooling_options: list[OptionFlag] = dataclasses.field(default_factory=list)
    slice_options: list[OptionFlag] = dataclasses.field(default_factory=list)
    ipu_version: str = ""
    device_connection_type: int = 0
    enable_remote_buffers_without_device: bool = False
    enable_experimental_remote_buffer_embedding: bool = False
    enable_experimental_prng_stability: bool = False
    multi_replica_process_index: int = 0
    multi_replica_process_count: int = 0
    num_io_tiles: int = 0
    place_ops_on_io_tiles: bool = False
    io_tile_available_memory_proportion: float = 0.0
    clear_matmul_pass_type: bool = False
    use_stable_norm_statistics: bool = False
    experimental_distributed_batch_norm_replica_group_size: int = 0
    prefetch_data_streams: bool = False
    enable_multi_slice_combiner: bool = False
    enable_matmul_combiner: bool = False
    max_cross_replica_sum_buffer_size: int = 0
    max_reduce_scatter_buffer_size: int = 0
    max_reduce_many_buffer_size: int = 0
    max_all_gather_buffer_size: int = 0
    max_inter_ipu_copies_buffer_size: int = 0
    max_send_recv_cluster_size: int = 0
    minimum_remote_tensor_size: int = 0
    remote_buffer_merging_mode: int = 0
    disable_gather_simplifier: bool = False
    triangular_solve_expander_block_size: int = 0
    cholesky_block_size: int = 0
    enable_fast_math: bool = False
    enable_dynamic_slice_replacement: bool = False
    max_scheduler_lookahead_depth: int = 0
    max_scheduler_search_space_size: int = 0


def _option_flags(options: dict[str, str]) -> list[OptionFlag]:
    return [OptionFlag(str(name), str(value)) for name, value in options.items()]


def _as_list(selection: int | list[int] | tuple[int, ...]) -> list[int]:
    return [selection] if isinstance(selection, int) else list(selection)


def ipu_options_from_config(config: "IPUConfig") -> IpuOptions:
    """The record of `config`; raises the ValueError of `IPUConfig.validate` for a config that
    breaks a rule, as the original's conversion does."""
    validate_ipu_config(config)
    fp = config.floating_point_behaviour
    optimizations = config.optimizations
    distribution = config.experimental.multi_replica_distribution
    return IpuOptions(
        creator_id=CREATOR_IPU_UTILS,
        device_config=[DeviceConfig(cfg_index=i) for i in _as_list(config.select_ipus)]
        + [DeviceConfig(auto_count=n) for n in _as_list(config.auto_select_ipus)],
        selection_order=config.selection_order.value,
        serialization_folder=config.serialization_output_folder,
        speed_size_config=SpeedSizeConfig(
            allow_recompute=config.allow_recompute,
            always_rearrange_copies_on_the_host=(
                config.experimental.always_rearrange_copies_on_the_host
            ),
            disable_graph_outlining=not optimizations.enable_graph_outlining,
            merge_infeed_io_copies=optimizations.merge_infeed_io_copies,
            scheduler_selection=config.scheduling.algorithm.value,
        ),
        # `set_all` turns every check and stochastic rounding on.
        floating_point_behaviour=FloatingPointBehaviour(
            inv=fp.inv or fp.set_all,
            div0=fp.div0 or fp.set_all,
            oflo=fp.oflo or fp.set_all,
            esr=1 if fp.set_all else fp.esr.value,
            nanoo=fp.nanoo or fp.set_all,
        ),
        ipu_model_config=IpuModelConfig(
            compile_ipu_code=config.ipu_model.compile_ipu_code,
            tiles_per_ipu=config.ipu_model.tiles_per_ipu,
            ipu_model_version=config.ipu_model.version,
        ),
        algebraic_simplifier_config=AlgebraicSimplifierConfig(
            enable_fast_math=optimizations.math.fast,
            enable_dot_strength=optimizations.math.dot_strength,
        ),
        compilation_options=_option_flags(config.compilation_poplar_options),
        gcl_options=_option_flags(config.gcl_poplar_options),
        convolution_options=_option_flags(config.convolutions.poplar_options),
        matmul_options=_option_flags(config.matmuls.poplar_options),
        pooling_options=_option_flags(config.pooling.poplar_options),
        slice_options=_option_flags(config.slices.poplar_options),
        ipu_version=config.device_connection.version,
        device_connection_type=config.device_connection.type.value,
        enable_remote_buffers_without_device=config.device_connection.enable_remote_buffers,
        enable_experimental_remote_buffer_embedding=(
            config.experimental.enable_remote_buffer_embedding
        ),
        enable_experimental_prng_stability=config.experimental.enable_prng_stability,
        multi_replica_process_index=distribution.process_index,
        multi_replica_process_count=distribution.process_count,
        num_io_tiles=config.io_tiles.num_io_tiles,
        place_ops_on_io_tiles=config.io_tiles.place_ops_on_io_tiles,
        io_tile_available_memory_proportion=config.io_tiles.available_memory_proportion,
        clear_matmul_pass_type=config.matmuls.clear_pass_type,
        use_stable_norm_statistics=config.norms.use_stable_statistics,
        experimental_distributed_batch_norm_replica_group_size=(
            config.norms.experimental.distributed_batch_norm_replica_group_size
        ),
        prefetch_data_streams=optimizations.prefetch_data_streams,
        enable_multi_slice_combiner=optimizations.combine_embedding_lookups,
        enable_matmul_combiner=optimizations.combine_matmuls,
        max_cross_replica_sum_buffer_size=optimizations.maximum_cross_replica_sum_buffer_size,
        max_reduce_scatter_buffer_size=optimizations.maximum_reduce_scatter_buffer_size,
        max_reduce_many_buffer_size=optimizations.maximum_reduce_many_buffer_size,
        max_all_gather_buffer_size=optimizations.maximum_all_gather_buffer_size,
        max_inter_ipu_copies_buffer_size=optimizations.maximum_inter_ipu_copies_buffer_size,
        max_send_recv_cluster_size=optimizations.maximum_send_recv_cluster_size,
        minimum_remote_tensor_size=optimizations.minimum_remote_tensor_size,
        remote_buffer_merging_mode=optimizations.merge_remote_buffers.value,
        disable_gather_simplifier=not optimizations.enable_gather_simplifier,
        triangular_solve_expander_block_size=optimizations.triangular_solve_expander_block_size,
        cholesky_block_size=optimizations.cholesky_block_size,
        enable_fast_math=optimizations.enable_fast_math,
        enable_dynamic_slice_replacement=optimizations.enable_dynamic_slice_replacement,
        max_scheduler_lookahead_depth=config.scheduling.maximum_scheduler_lookahead_depth,
        max_scheduler_search_space_size=config.scheduling.maximum_scheduler_search_space_size,
    )
