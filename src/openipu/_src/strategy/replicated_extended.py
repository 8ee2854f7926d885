"""Replicas of an emulated IPU device, on tf.distribute's mirrored machinery.

A real IPU device of R IPUs runs R replicas of a one-IPU program: each holds
the same variables, gets its own data, and replicas exchange values through
cross-replica collectives. openipu builds this on `tf.distribute`'s mirrored
strategy: replica contexts, mirrored and sync-on-read variables (per-replica
state such as batch-norm statistics), and all-reduces come from it.

What differs from a stock `MirroredStrategy` is where the replicas are: all
replicas of a compiled program are placed on the host device of the IPU
device that runs it. Stock XLA cannot compile a computation that touches
variables on several logical devices (a mirrored `fit` with
`jit_compile=True` over two logical CPUs fails), but with the replicas on one
device XLA compiles all of them, and their all-reduces, into one program:
on this 2-core machine 2 and 4 replicas run at 0.96 and 0.92 of one
replica's samples/s (see benchmarks/replication.py). Reductions go through
one device (`ReductionToOneDevice`), which is the device itself.
"""

from __future__ import annotations

from tensorflow.python.distribute import cross_device_ops, device_util, mirrored_strategy


class IPUReplicatedExtended(mirrored_strategy.MirroredExtended):
    """Strategy internals: R replicas of one IPU device's program, on its host device."""

    def __init__(self, container_strategy, ipu_ordinal: int, host_device: str, replicas: int):
        self._ipu_ordinal = ipu_ordinal
        self._replica_count = replicas
        super().__init__(
            container_strategy,
            devices=[host_device] * replicas,
            cross_device_ops=cross_device_ops.ReductionToOneDevice(),
        )

    @property
    def ipu_ordinal(self) -> int:
        return self._ipu_ordinal

    def _initialize_strategy(self, devices):
        # The stock strategy refuses repeated devices; here every replica shares one.
        devices = tuple(device_util.resolve(d) for d in devices)
        self._initialize_single_worker(devices)
        self._collective_ops = self._cross_device_ops
