"""`IpuOptions`: an `IPUConfig` converted into the protobuf the original's backend receives.

The original converts its `IPUConfig` into the `IpuOptions` protobuf of its Poplar backend
(`IPUConfig._create_protobuf` and the `_to_protobuf` method of each category,
tensorflow/python/ipu/config.py; fields in tensorflow/compiler/plugin/poplar/driver/config.proto)
and checks the rules that involve several options while doing so. Enum fields hold the
values of the original's protobuf enums, which `enums.py` gives its enums.
"""

from typing import TYPE_CHECKING

from google.protobuf.message import Message

from openipu._src.config.enums import StochasticRoundingBehaviour
from openipu._src.config.ipu_options_proto import IpuOptions, IpuOptionsCreator
from openipu._src.config.validation import validate_ipu_config

if TYPE_CHECKING:
    from openipu._src.config.ipu_config import IPUConfig


def _option_flags(options: dict[str, str]) -> list[dict[str, str]]:
    """`PoplarOptionFlag` entries, in the dict's order (`_poplar_options_to_protobuf`)."""
    return [{"option": str(name), "value": str(value)} for name, value in options.items()]


def _as_list(selection: int | list[int] | tuple[int, ...]) -> list[int]:
    return [selection] if isinstance(selection, int) else list(selection)


def ipu_options_from_config(config: "IPUConfig") -> Message:
    """The `IpuOptions` protobuf of `config`; raises the ValueError of `IPUConfig.validate` for a config that
    breaks a rule, as the original's conversion does."""
    validate_ipu_config(config)
    fp = config.floating_point_behaviour
    optimizations = config.optimizations
    distribution = config.experimental.multi_replica_distribution
    options: Message = IpuOptions(
        creator_id=IpuOptionsCreator.IPU_UTILS,
        # One device per selection entry, the `select_ipus` ones first (only one of the two may
        # be set).
        device_config=[{"cfg_index": i} for i in _as_list(config.select_ipus)]
        + [{"auto_count": n} for n in _as_list(config.auto_select_ipus)],
        selection_order=config.selection_order.value,
        serialization_folder=config.serialization_output_folder,
        speed_size_config=dict(
            allow_recompute=config.allow_recompute,
            always_rearrange_copies_on_the_host=(
                config.experimental.always_rearrange_copies_on_the_host
            ),
            disable_graph_outlining=not optimizations.enable_graph_outlining,
            merge_infeed_io_copies=optimizations.merge_infeed_io_copies,
            scheduler_selection=config.scheduling.algorithm.value,
        ),
        # `set_all` turns every check and stochastic rounding on.
        floating_point_behaviour=dict(
            inv=fp.inv or fp.set_all,
            div0=fp.div0 or fp.set_all,
            oflo=fp.oflo or fp.set_all,
            esr=StochasticRoundingBehaviour.ON.value if fp.set_all else fp.esr.value,
            nanoo=fp.nanoo or fp.set_all,
        ),
        ipu_model_config=dict(
            compile_ipu_code=config.ipu_model.compile_ipu_code,
            tiles_per_ipu=config.ipu_model.tiles_per_ipu,
            ipu_model_version=config.ipu_model.version,
        ),
        algebraic_simplifier_config=dict(
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
    return options
