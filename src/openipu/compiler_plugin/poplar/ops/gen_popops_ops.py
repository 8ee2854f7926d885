"""`tensorflow.compiler.plugin.poplar.ops.gen_popops_ops`: its raw PopOps operations
(re-exports only)."""

from openipu._src.ops.plugin_ops.popops_ops import (
    ipu_all_gather,
    ipu_all_to_all,
    ipu_cross_replica_mean,
    ipu_cross_replica_sum,
    ipu_histogram,
    ipu_histogram_update,
    ipu_multi_slice,
    ipu_multi_update,
    ipu_multi_update_add,
    ipu_reduce_scatter,
    ipu_sequence_slice,
    ipu_sequence_slice_unpack,
    normalise_image,
)

__all__ = [
    "ipu_all_gather",
    "ipu_all_to_all",
    "ipu_cross_replica_mean",
    "ipu_cross_replica_sum",
    "ipu_histogram",
    "ipu_histogram_update",
    "ipu_multi_slice",
    "ipu_multi_update",
    "ipu_multi_update_add",
    "ipu_reduce_scatter",
    "ipu_sequence_slice",
    "ipu_sequence_slice_unpack",
    "normalise_image",
]
