"""Every IPUConfig option, transcribed by hand from spec section 21.7 (not from the code).

(full dotted name, type as the spec prints it, default as the spec prints it)
"""

from openipu._src.config.enums import (
    DeviceConnectionType,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)

# The original's metadata spells the annotation as written in its source.
IPU_SELECTION = "typing.Union[int, typing.List[int], typing.Tuple[int, ...]]"

SPEC_OPTIONS = [
    ("allow_recompute", "bool", False),
    ("selection_order", "SelectionOrder", SelectionOrder.AUTO),
    ("serialization_output_folder", "str", ""),
    ("compilation_poplar_options", "dict", {}),
    ("gcl_poplar_options", "dict", {}),
    ("auto_select_ipus", IPU_SELECTION, []),
    ("select_ipus", IPU_SELECTION, []),
    ("convolutions.poplar_options", "dict", {}),
    ("device_connection.type", "DeviceConnectionType", DeviceConnectionType.ALWAYS),
    ("device_connection.version", "str", ""),
    ("device_connection.enable_remote_buffers", "bool", False),
    ("slices.poplar_options", "dict", {}),
    ("experimental.always_rearrange_copies_on_the_host", "bool", False),
    ("experimental.enable_remote_buffer_embedding", "bool", False),
    ("experimental.enable_prng_stability", "bool", False),
    ("experimental.multi_replica_distribution.process_index", "int", 0),
    ("experimental.multi_replica_distribution.process_count", "int", 0),
    ("floating_point_behaviour.inv", "bool", False),
    ("floating_point_behaviour.div0", "bool", False),
    ("floating_point_behaviour.oflo", "bool", False),
    (
        "floating_point_behaviour.esr",
        "StochasticRoundingBehaviour",
        StochasticRoundingBehaviour.OFF,
    ),
    ("floating_point_behaviour.nanoo", "bool", False),
    ("floating_point_behaviour.set_all", "bool", False),
    ("io_tiles.num_io_tiles", "int", 0),
    ("io_tiles.place_ops_on_io_tiles", "bool", False),
    ("io_tiles.available_memory_proportion", "float", 0.9),
    ("ipu_model.compile_ipu_code", "bool", True),
    ("ipu_model.tiles_per_ipu", "int", 0),
    ("ipu_model.version", "str", "ipu2"),
    ("matmuls.clear_pass_type", "bool", False),
    ("matmuls.poplar_options", "dict", {}),
    ("norms.use_stable_statistics", "bool", False),
    ("norms.experimental.distributed_batch_norm_replica_group_size", "int", 1),
    ("optimizations.math.fast", "bool", False),
    ("optimizations.math.dot_strength", "bool", True),
    ("optimizations.prefetch_data_streams", "bool", True),
    ("optimizations.combine_embedding_lookups", "bool", False),
    ("optimizations.combine_matmuls", "bool", False),
    ("optimizations.enable_graph_outlining", "bool", True),
    ("optimizations.merge_infeed_io_copies", "bool", True),
    ("optimizations.maximum_cross_replica_sum_buffer_size", "int", 0),
    ("optimizations.maximum_reduce_scatter_buffer_size", "int", 0),
    ("optimizations.maximum_inter_ipu_copies_buffer_size", "int", 0),
    ("optimizations.maximum_send_recv_cluster_size", "int", 0),
    ("optimizations.maximum_reduce_many_buffer_size", "int", 0),
    ("optimizations.maximum_all_gather_buffer_size", "int", 0),
    ("optimizations.minimum_remote_tensor_size", "int", 128),
    (
        "optimizations.merge_remote_buffers",
        "MergeRemoteBuffersBehaviour",
        MergeRemoteBuffersBehaviour.IF_BENEFICIAL,
    ),
    ("optimizations.enable_gather_simplifier", "bool", True),
    ("optimizations.triangular_solve_expander_block_size", "int", 0),
    ("optimizations.cholesky_block_size", "int", 0),
    ("optimizations.enable_fast_math", "bool", False),
    ("optimizations.enable_dynamic_slice_replacement", "bool", True),
    ("pooling.poplar_options", "dict", {}),
    ("scheduling.algorithm", "SchedulingAlgorithm", SchedulingAlgorithm.CHOOSE_BEST),
    ("scheduling.maximum_scheduler_lookahead_depth", "int", 5),
    ("scheduling.maximum_scheduler_search_space_size", "int", 64),
]

SPEC_CATEGORIES = [
    "convolutions",
    "device_connection",
    "slices",
    "experimental",
    "experimental.multi_replica_distribution",
    "floating_point_behaviour",
    "io_tiles",
    "ipu_model",
    "matmuls",
    "norms",
    "norms.experimental",
    "optimizations",
    "optimizations.math",
    "pooling",
    "scheduling",
]

DEPRECATED_OPTIONS = {"optimizations.enable_fast_math"}
