"""Host reductions across processes, one value per process.

Each process is one tf.distribute replica on its host device (see
`collective_extended`); outside IPU programs a reduction is one collective
per process (`CollectiveAllReduce` over the processes' devices, gRPC between
them), as the original's host all-reduce. With one process no collective op
is built, and the program can still compile under XLA.
"""

from __future__ import annotations

import copy

from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import cross_device_utils, reduce_util, values_util
from tensorflow.python.distribute import values as distribute_values
from tensorflow.python.eager import context, def_function
from tensorflow.python.framework import indexed_slices


class CrossProcessReduce(cross_device_ops_lib.CollectiveAllReduce):
    """All-reduces one value per process across the processes."""

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
        values = [_only_value(value) for value, _ in value_destination_pairs]
        reduced = self._reduced(reduce_op, values, options)
        return [
            self.broadcast_implementation(total, destinations)
            for total, (_, destinations) in zip(reduced, value_destination_pairs, strict=True)
        ]

    def _reduced(self, reduce_op, values: list, options) -> list:
        totals = self._sum_across_processes(values, options)
        if reduce_op == reduce_util.ReduceOp.MEAN:
            return [_divided(total, self._process_count) for total in totals]
        return totals

    def _gather_implementation(self, per_replica_value, destinations, axis, options):
        values_util.mark_as_unsaveable()
        local = _only_value(per_replica_value)
        if self._process_count > 1:
            # Dimension `axis` may differ between processes; the launcher pads and unpads it.
            def gather():
                return self._launchers[0].all_gather(local, axis, self._options.merge(options))

            local = def_function.function(gather)() if context.executing_eagerly() else gather()
        return self.broadcast_implementation(local, destinations)

    def _all_reduce(self, reduce_op, value, replica_id, options):
        # A replica context's all-reduce: the process's one value, reduced across processes.
        return self._reduced(reduce_op, [_only_value(value)], options)[0]

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
        # As TensorFlow's CollectiveAllReduce (python/distribute/cross_device_ops.py:1344-1349
        # in the original's tree): a new instance on the same device and processes, with
        # copied collective keys (the strategy's copy shares them through `memo`).
        return CrossProcessReduce(
            self._devices[0],
            self._process_count,
            self._options,
            copy.deepcopy(self._collective_keys, memo),
        )


def _only_value(value):
    """The process's value (its one tf.distribute replica's)."""
    if isinstance(value, distribute_values.DistributedValues):
        (value,) = value.values
    return value


def _divided(value, count: int):
    if isinstance(value, indexed_slices.IndexedSlices):
        return indexed_slices.IndexedSlices(value.values / count, value.indices, value.dense_shape)
    return value / count
