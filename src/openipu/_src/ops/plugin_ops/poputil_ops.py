"""Raw PopUtil operations (`gen_poputil_ops`): replication helpers and stateful gradient
accumulation, with the argument names and defaults of the original's op registrations
(tensorflow/compiler/plugin/poplar/ops/poputil/*.cc)."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.ops import (
    collectives,
    control_flow_ops,
    cross_replica_ops,
    internal_ops,
    replication_ops,
)
from openipu._src.ops.plugin_ops import stateful_accumulation


@collectives.collective_builder()
def ipu_replication_normalise(input, name=None) -> tf.Tensor:  # noqa: A002
    """`input` divided by the number of replicas (of every process the program spans).

    In a plain TF1 ipu_scope (or `tf.device`) outside any program, the replicas of that
    scope's device, one per IPU, as the original's executor runs such ops there
    (replication_normalise_test.py).
    """
    with tf.name_scope(name or "IpuReplicationNormalise"):
        x = tf.convert_to_tensor(input)
        if x.dtype not in (tf.float16, tf.float32):
            # The op's dtype attribute: {float16, float32} (poputil/replication_factor.cc).
            raise TypeError(
                f"ipu_replication_normalise: input must be float16 or float32, got dtype "
                f"{x.dtype.name}"
            )
        return x / tf.cast(collectives.replica_count(), x.dtype)


def replication_index(name=None) -> tf.Tensor:
    """An int32 scalar: the index of this replica."""
    return replication_ops.replication_index(name=name or "ReplicationIndex")


def ipu_assume_equal_across_replicas(inputs, name=None) -> tf.Tensor:
    """`inputs` unchanged (a promise to the compiler that every replica holds them)."""
    with tf.name_scope(name or "IpuAssumeEqualAcrossReplicas"):
        return cross_replica_ops.assume_equal_across_replicas(tf.convert_to_tensor(inputs))


def ipu_stateful_gradient_accumulate(
    input,  # noqa: A002
    num_mini_batches,
    verify_usage=True,
    name=None,
) -> tf.Tensor:
    """The sum of the last `num_mini_batches` inputs every `num_mini_batches`-th call, else
    zeros. `verify_usage` (the original's compile-time check of where the op is used) is
    accepted."""
    return stateful_accumulation.accumulate(input, num_mini_batches, name=name)


def ipu_stateful_gradient_accumulate_with_momentum(
    accum,
    grad,
    momentum,
    num_mini_batches,
    name=None,
) -> tf.Tensor:
    """`accum * momentum + sum of num_mini_batches grads`, kept in `accum`, every
    `num_mini_batches`-th call, else zeros."""
    return stateful_accumulation.accumulate_with_momentum(
        accum, grad, momentum, num_mini_batches, name=name
    )


def execution_counter(lower_into_pipeline_stage=False, name=None) -> tf.Tensor:
    """Which iteration of the enclosing device loop (a pipeline's, `loops.repeat`'s) runs."""
    # The original's `internal_ops.get_current_iteration_counter` is this op.
    return internal_ops.get_current_iteration_counter(name=name or "ExecutionCounter")


def ipu_fifo(input, depth, offload, name=None) -> tf.Tensor:  # noqa: A002
    """`input` as it was `depth` calls ago (zeros for the first `depth` calls)."""
    return internal_ops.fifo(input, depth, offload=offload, name=name or "IpuFifo")


def ipu_print_tensor(input, tensor_name, name=None):  # noqa: A002
    """Prints `input` (labelled `tensor_name` when given) to standard error."""
    with tf.name_scope(name or "IpuPrintTensor"):
        return internal_ops.print_tensor(input, name=tensor_name)


def ipu_remap(input, name=None) -> tf.Tensor:  # noqa: A002
    """`input`, laid out linearly over the tiles (a layout change only)."""
    return internal_ops.remap(input, name=name or "IpuRemap")


def ipu_remap_deduce(input, name=None) -> tf.Tensor:  # noqa: A002
    """`input`, with a tile layout deduced from it (a layout change only)."""
    return internal_ops.remap_deduce(input, name=name or "IpuRemapDeduce")


def device_sync(name=None) -> tf.Operation:
    """An operation with no outputs: the emulated IPUs run in step with the host already."""
    return tf.no_op(name=name or "DeviceSync")


def ipu_barrier(inputs, insert_barrier_for_gradients=False, name=None) -> list[tf.Tensor]:
    """`inputs` (a list), none of them ready before all of them are."""
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"ipu_barrier: inputs must be a list of tensors, got {inputs!r}")
    return list(
        control_flow_ops.barrier(
            list(inputs), bool(insert_barrier_for_gradients), name=name or "IpuBarrier"
        )
    )
