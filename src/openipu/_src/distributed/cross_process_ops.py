"""Reductions of replicas that share a device in each of several processes.

Each process runs its replicas as mirrored replicas on one host device (see
`collective_extended`). TensorFlow's collectives
name their members by device, so replicas sharing a device cannot be members
of one collective. Reductions therefore go in two stages: the replicas of a
process are summed on their device, then one collective per process
(`CollectiveAllReduce` over the processes' devices, gRPC between them)
combines the processes' sums, and every local replica gets the result.
With one process the second stage is skipped: no collective op is built,
and the program can still compile under XLA.
"""

from __future__ import annotations

from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import cross_device_utils, reduce_util, values_util
from tensorflow.python.distribute import values as distribute_values
from tensorflow.python.eager import context, def_function
from tensorflow.python.framework import indexed_slices, ops
from tensorflow.python.ops import array_ops


class LocalThenCrossProcessReduce(cross_device_ops_lib.CollectiveAllReduce):
    """Sums a process's replicas on their shared device, then all-reduces across processes."""

    def __init__(self, device: str, process_count: int, options, collective_keys) -> None:
        super().__init__(
            devices=[device],
            group_size=process_count,
            options=options,
            collective_keys=collective_keys,
        )
        self._process_count = process_count

    def reduce_implementation(self, reduce_op, per_replica_value, destinations, options):
        pairs = [(per_replica_value, destinations)]
        return self.batch_reduce_implementation(reduce_op, pairs, options)[0]

    def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
        values_util.mark_as_unsaveable()
        local_sums = [self._local_sum(value) for value, _ in value_destination_pairs]
        reduced = self._sum_across_processes(local_sums, options)
        results = []
        for total, (value, destinations) in zip(reduced, value_destination_pairs, strict=True):
            if reduce_op == reduce_util.ReduceOp.MEAN:
                total = _divided(total, _replica_count(value) * self._process_count)
            results.append(self.broadcast_implementation(total, destinations))
        return results

    def _gather_implementation(self, per_replica_value, destinations, axis, options):
        values_util.mark_as_unsaveable()
        with ops.device(self._devices[0]):
            local = array_ops.concat(_values_of(per_replica_value), axis=axis)
        if self._process_count > 1:
            # Dimension `axis` may differ between processes; the launcher pads and unpads it.
            def gather():
                return self._launchers[0].all_gather(local, axis, self._options.merge(options))

            local = def_function.function(gather)() if context.executing_eagerly() else gather()
        return self.broadcast_implementation(local, destinations)

    def _all_reduce(self, reduce_op, value, replica_id, options):
        # Only reached without merge_call, which the owning strategy never does.
        raise NotImplementedError("Replicas sharing a device all-reduce through merge_call")

    def _local_sum(self, value):
        with ops.device(self._devices[0]):
            return cross_device_utils.aggregate_tensors_or_indexed_slices(_values_of(value))

    def _sum_across_processes(self, tensors: list, options) -> list:
        if self._process_count == 1:
            return list(tensors)
        options = self._options.merge(options)
        launcher = self._launchers[0]
        sums: list = [None] * len(tensors)
        dense_by_dtype: dict = {}
        for position, tensor in enumerate(tensors):
            if isinstance(tensor, indexed_slices.IndexedSlices):
                sums[position] = launcher.all_reduce_indexed_slices(tensor, options)
            else:
                dense_by_dtype.setdefault(tensor.dtype, []).append(position)
        # A pack is concatenated into one collective, so it holds one dtype. Reversed, as the
        # stock collectives do: gradients arrive last layer first.
        for positions in dense_by_dtype.values():
            positions = positions[::-1]
            packs = cross_device_utils.group_by_size(
                [tensors[p] for p in positions], options.bytes_per_pack
            )
            for position, total in zip(
                positions, launcher.batch_all_reduce(packs, options), strict=True
            ):
                sums[position] = total
        return sums

    def __deepcopy__(self, memo):
        raise TypeError("LocalThenCrossProcessReduce is owned by its strategy and is not copied")


def _values_of(value) -> tuple:
    if isinstance(value, distribute_values.DistributedValues):
        return tuple(value.values)
    return (value,)


def _replica_count(value) -> int:
    return len(_values_of(value))


def _divided(value, count: int):
    if isinstance(value, indexed_slices.IndexedSlices):
        return indexed_slices.IndexedSlices(value.values / count, value.indices, value.dense_shape)
    return value / count
