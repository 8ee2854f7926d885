"""`tensorflow.compiler.plugin.poplar.ops.gen_poputil_ops`: its raw PopUtil operations
(re-exports only)."""

from openipu._src.ops.plugin_ops.poputil_ops import (
    device_sync,
    execution_counter,
    ipu_assume_equal_across_replicas,
    ipu_barrier,
    ipu_fifo,
    ipu_print_tensor,
    ipu_remap,
    ipu_remap_deduce,
    ipu_replication_normalise,
    ipu_stateful_gradient_accumulate,
    ipu_stateful_gradient_accumulate_with_momentum,
    replication_index,
)

__all__ = [
    "device_sync",
    "execution_counter",
    "ipu_assume_equal_across_replicas",
    "ipu_barrier",
    "ipu_fifo",
    "ipu_print_tensor",
    "ipu_remap",
    "ipu_remap_deduce",
    "ipu_replication_normalise",
    "ipu_stateful_gradient_accumulate",
    "ipu_stateful_gradient_accumulate_with_momentum",
    "replication_index",
]
