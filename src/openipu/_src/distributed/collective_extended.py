"""Replicas in several processes, on TensorFlow's multi-worker collective strategy.

How processes, replicas and devices map:

- each process (a `poprun` instance, a `worker` task of `TF_CONFIG`) runs its
  IPU device's replicas, one per IPU, as tf.distribute mirrored replicas that
  all share the device's host device, so one region holds them (a single
  process replicates inside its programs instead: `engine.replicas`);
- the global replica index is process index * local replicas + local index,
  and `num_replicas_in_sync` counts every process's replicas;
- variables start equal everywhere: the first process broadcasts their
  initial values (TensorFlow's multi-worker strategy does);
- reductions sum the local replicas on their device, then all-reduce the
  processes' sums with TensorFlow's collectives over gRPC
  (`cross_process_ops`). Regions holding such a collective run as graphs
  (see `engine.compile_policy`), as an IPU program moves its inter-host
  all-reduce out of the compiled program to the host.

This is `CollectiveAllReduceExtended` (the engine of
`MultiWorkerMirroredStrategy`) with the local devices and the reduction
replaced; everything else (cluster, server, input contexts, checkpoint
rules) is TensorFlow's.
"""

from __future__ import annotations

import itertools

from tensorflow.python.distribute import (
    collective_all_reduce_strategy,
    collective_util,
    mirrored_strategy,
)
from tensorflow.python.distribute import values as distribute_values

from openipu._src.distributed import cluster_runtime, cross_process_ops
from openipu._src.system import configure


class IPUMirroredVariable(distribute_values.MirroredVariable):
    """A variable kept equal on every replica of every process (synchronised on write)."""


class IPUSyncOnReadVariable(distribute_values.SyncOnReadVariable):
    """A variable each replica updates on its own, aggregated across replicas when read."""


_IPU_VARIABLE_CLASSES = {
    distribute_values.MirroredVariable: IPUMirroredVariable,
    distribute_values.SyncOnReadVariable: IPUSyncOnReadVariable,
}


_key_bases = itertools.count(1)


def _next_collective_key_base() -> int:
    return 10_000 * next(_key_bases)


class IPUCollectiveExtended(collective_all_reduce_strategy.CollectiveAllReduceExtended):
    """Strategy internals: this process's IPU replicas, reduced with every other process's."""

    # The coordination service's heartbeats detect dead peers; no polling thread is needed.
    _enable_check_health = False

    def __init__(self, container_strategy, cluster_resolver, ipu_device: str) -> None:
        from openipu._src.strategy import ipu_strategy

        self._ipu_ordinal = ipu_strategy._parse_ordinal(ipu_device)  # noqa: SLF001
        self._ipu_host_device = ipu_strategy._host_device_for(self._ipu_ordinal)  # noqa: SLF001
        self._local_replica_count = self._replica_slots()
        cluster_resolver = cluster_runtime.resolver(cluster_resolver)
        if cluster_runtime.start(cluster_resolver) is not None:
            self._std_server_started = True  # the process's runtime owns the server
        # Each strategy numbers its collectives apart from the others' (all instances create
        # their strategies in the same order, so the numbers agree).
        container_strategy._collective_key_base = _next_collective_key_base()  # noqa: SLF001
        with cluster_runtime.configurable_after_startup():
            super().__init__(
                container_strategy,
                cluster_resolver=cluster_resolver,
                communication_options=collective_util.Options(),
            )

    def _replica_slots(self) -> int:
        """Replica slots of this process: one per IPU of the configured device."""
        system = configure.maybe_current_system()
        if system is None or self._ipu_ordinal >= len(system.devices):
            return 1
        return system.device(self._ipu_ordinal).num_ipus

    @property
    def ipu_ordinal(self) -> int:
        return self._ipu_ordinal

    @property
    def local_replica_count(self) -> int:
        """Replicas run by this process (`num_replicas_in_sync` counts every process's)."""
        return self._local_replica_count

    @property
    def process_count(self) -> int:
        return self._num_workers

    @property
    def process_index(self) -> int:
        return self._id_in_cluster

    def _initialize_local_devices(self, cluster_resolver, worker_device):
        # The IPU device's host device, once per local replica (the stock strategy: its GPUs).
        device = f"{worker_device}{self._ipu_host_device}"
        return (device,) * self._local_replica_count, "CPU"

    def _initialize_strategy(self, cluster_resolver, devices):
        # Single-process mode keeps the stock strategy's special case out: one worker is local.
        if not cluster_runtime.is_multi_process(cluster_resolver):
            self._initialize_local(cluster_resolver, devices=devices)
        else:
            self._initialize_multi_worker(cluster_resolver)
        self._cross_device_ops = cross_process_ops.LocalThenCrossProcessReduce(
            self._devices[0],
            self._num_workers,
            self._communication_options,
            self._collective_keys,
        )

    def _use_merge_call(self) -> bool:
        # Replicas sharing a device meet in merge_call (see cross_process_ops).
        return True

    def _replica_ctx_all_reduce(self, reduce_op, value, options=None):
        return mirrored_strategy.MirroredExtended._replica_ctx_all_reduce(  # noqa: SLF001
            self, reduce_op, value, options
        )

    def _create_variable(self, next_creator, **kwargs):
        variable = super()._create_variable(next_creator, **kwargs)
        # tf.distribute picks variable classes from a module-wide table; the IPU classes add
        # no state, so the created variable only changes class.
        ipu_class = _IPU_VARIABLE_CLASSES.get(type(variable))
        if ipu_class is not None:
            variable.__class__ = ipu_class
        return variable

    def __deepcopy__(self, memo):
        raise TypeError(f"{type(self).__name__} cannot be copied: it owns this process's replicas")
