"""Replicas in several processes, on TensorFlow's multi-worker collective strategy.

How processes, replicas and devices map:

- each process (a `poprun` instance, a `worker` task of `TF_CONFIG`) is one
  tf.distribute replica on its IPU device's host device, as in the original
  (tensorflow/python/ipu/distributed/popdist_strategy.py: one host device per
  process); its programs replicate on the device's IPUs (`engine.replicas`);
- `num_replicas_in_sync` counts every process's replicas (the original's
  popdist.getNumTotalReplicas()), and a program's replica index is global:
  process index * local replicas + local index;
- variables start equal everywhere: the first process broadcasts their
  initial values (TensorFlow's multi-worker strategy does);
- reductions inside a program sum the local replicas (`engine.replicas`), then
  all-reduce the processes' sums with TensorFlow's collectives over gRPC
  (`cross_process_sum`, which the engine finds on the strategy); outside a
  program they all-reduce across processes on the host. Regions holding such a collective run as graphs
  (see `engine.compile_policy`), as an IPU program moves its inter-host
  all-reduce out of the compiled program to the host.

This is `CollectiveAllReduceExtended` (the engine of
`MultiWorkerMirroredStrategy`) with the local devices and the reduction
replaced; everything else (cluster, server, input contexts, checkpoint
rules) is TensorFlow's.
"""

from __future__ import annotations

import collections
import copy
import threading

import tensorflow as tf
from tensorflow.python.distribute import (
    collective_all_reduce_strategy,
    collective_util,
    distribute_lib,
)
from tensorflow.python.distribute import values as distribute_values
from tensorflow.python.eager import context, def_function
from tensorflow.python.framework import device as tf_device
from tensorflow.python.framework import ops
from tensorflow.python.util import nest

from openipu._src.distributed import cluster_runtime, cross_process_ops, environment
from openipu._src.engine import region
from openipu._src.engine.replicas import exchange_ops, lockstep
from openipu._src.integration import session_run
from openipu._src.strategy import ipu_strategy
from openipu._src.system import configure


class IPUMirroredVariable(distribute_values.MirroredVariable):
    """A variable kept equal on every replica of every process (synchronised on write)."""


class IPUSyncOnReadVariable(distribute_values.SyncOnReadVariable):
    """A variable each replica updates on its own, aggregated across replicas when read."""


_IPU_VARIABLE_CLASSES = {
    distribute_values.MirroredVariable: IPUMirroredVariable,
    distribute_values.SyncOnReadVariable: IPUSyncOnReadVariable,
}


# Strategies made so far by each task (several tasks may share a process: TF1 programs
# run workers as threads, as the original's in-process tests do).
_strategies_per_task: collections.Counter = collections.Counter()
_strategies_lock = threading.Lock()


def _next_collective_key_base(cluster_resolver, first: int) -> int:
    """Where the next strategy of this task numbers its collectives.

    Every task creates its strategies in the same order, so counting per task gives
    the n-th strategy of each task the same keys. `first` is the strategy class's
    `_collective_key_base`: moving it (the original's tests do between tests) starts
    the count again, so tasks that made different numbers of strategies agree again.
    """
    task = (cluster_resolver.task_type, cluster_resolver.task_id, first)
    with _strategies_lock:
        _strategies_per_task[task] += 1
        return first + 10_000 * _strategies_per_task[task]


def _in_program() -> bool:
    """Whether an IPU program (a region, possibly of lock-step replicas) is being built."""
    return lockstep.current() is not None or region.current_region() is not None


class IPUCollectiveExtended(collective_all_reduce_strategy.CollectiveAllReduceExtended):
    """Strategy internals: this process's IPU replicas, reduced with every other process's."""

    # The coordination service's heartbeats detect dead peers; no polling thread is needed.
    _enable_check_health = False
    # Whether reductions inside IPU programs cross the replicas (PopDistStrategy can say no).
    _add_ipu_cross_replica_reductions = True

    def __init__(self, container_strategy, cluster_resolver, ipu_device: str) -> None:
        # Any device string DeviceSpec parses is accepted, as the original's
        # `_ipu_device_for_host` (distributed/popdist_strategy.py:98-109,
        # ipu_multi_worker_strategy.py:235-246); an unparsable one is its ValueError. On a
        # device other than an IPU, `fn` runs there as ordinary TensorFlow and reductions
        # are host all-reduces across the processes (the original's `_reduce_to` off the IPU).
        self._device_spec = tf_device.DeviceSpec.from_string(ipu_device)
        self._ipu_ordinal = configure.ipu_ordinal(ipu_device)
        self._ipu_host_device = (
            "/device:CPU:0"
            if self._ipu_ordinal is None
            else ipu_strategy._host_device_for(self._ipu_ordinal)  # noqa: SLF001
        )
        self._local_replica_count = self._local_replicas()
        cluster_resolver = cluster_runtime.resolver(cluster_resolver)
        self._copy_refused = (
            self._copy_refused_when_eager_with_cluster
            and context.executing_eagerly()
            and bool(cluster_resolver.cluster_spec().as_dict())
        )
        # Eager programs share the process's collective runtime (one server per process). A
        # TF1 graph program runs its collectives in sessions on servers it starts itself
        # (between-graph replication: the original's in-process tests run several workers
        # as threads of one process), so nothing is started here, as TensorFlow's own
        # collective strategy does in graph mode.
        if ops.executing_eagerly_outside_functions() and cluster_runtime.start(cluster_resolver):
            self._std_server_started = True  # the process's runtime owns the server
        # TF1 sessions on gRPC servers run collectives inside the loops of programs.
        session_run.install()
        # Each strategy numbers its collectives apart from the others'.
        container_strategy._collective_key_base = _next_collective_key_base(  # noqa: SLF001
            cluster_resolver,
            type(container_strategy)._collective_key_base,  # noqa: SLF001
        )
        with cluster_runtime.configurable_after_startup():
            super().__init__(
                container_strategy,
                cluster_resolver=cluster_resolver,
                communication_options=collective_util.Options(),
            )

    def _local_replicas(self) -> int:
        """Replicas of this process: poprun's placement, else one per IPU of its device."""
        if environment.is_set():
            return environment.current_placement().num_local_replicas
        return self.device_ipus()

    def device_ipus(self) -> int:
        """IPUs of this process's configured device (1 before configuration)."""
        system = configure.maybe_current_system()
        if system is None or self._ipu_ordinal is None or self._ipu_ordinal >= len(system.devices):
            return 1
        return system.device(self._ipu_ordinal).num_ipus

    @property
    def ipu_ordinal(self) -> int | None:
        """The ordinal of the strategy's IPU device; None when it names another device."""
        return self._ipu_ordinal

    @property
    def local_replica_count(self) -> int:
        """Replicas run by this process's programs (`num_replicas_in_sync` counts all)."""
        return self._local_replica_count

    # Whether `num_replicas_in_sync` counts the replicas of every process's programs (the
    # original's popdist.getNumTotalReplicas()) or one per process (IPUMultiWorkerStrategy).
    _program_replicas_in_sync = True

    @property
    def _num_replicas_in_sync(self) -> int:
        if not self._program_replicas_in_sync:
            return self._num_workers
        return self._all_program_replicas

    @property
    def _all_program_replicas(self) -> int:
        return self._local_replica_count * self._num_workers

    @property
    def process_count(self) -> int:
        return self._num_workers

    @property
    def process_index(self) -> int:
        return self._id_in_cluster

    def _initialize_local_devices(self, cluster_resolver, worker_device):
        # One device per process, the IPU device's host device (the original: one IPU device);
        # the process's replicas are replicas of its programs.
        return (f"{worker_device}{self._ipu_host_device}",), "CPU"

    def _initialize_strategy(self, cluster_resolver, devices):
        # Single-process mode keeps the stock strategy's special case out: one worker is local.
        if not cluster_runtime.is_multi_process(cluster_resolver):
            self._initialize_local(cluster_resolver, devices=devices)
        else:
            self._initialize_multi_worker(cluster_resolver)
        self._cross_device_ops = cross_process_ops.CrossProcessReduce(
            self._devices[0],
            self._num_workers,
            self._communication_options,
            self._collective_keys,
        )

    def _call_for_each_replica(self, fn, args, kwargs):
        # One tf.distribute replica per process, built in the calling thread (the engine's
        # replicas keep their state there), as the original's PopDistExtendedV1.
        replica_context = distribute_lib.ReplicaContext(
            self._container_strategy(), replica_id_in_sync_group=0
        )
        with ops.device(self._replica_device()), replica_context:
            return fn(*args, **kwargs)

    def _replica_device(self) -> str:
        """Where `fn` runs: the host device, or the strategy's non-IPU device on this task."""
        if self._ipu_ordinal is not None:
            return self._devices[0]
        host = tf_device.DeviceSpec.from_string(self._devices[0])
        return tf_device.DeviceSpec(
            job=host.job,
            replica=host.replica,
            task=host.task,
            device_type=self._device_spec.device_type,
            device_index=self._device_spec.device_index,
        ).to_string()

    def _reduce_to(self, reduce_op, value, destinations, options):
        # tensorflow/python/ipu/distributed/popdist_strategy.py: inside an IPU program a
        # cross-replica sum (or mean) over every replica of every process; elsewhere a host
        # all-reduce across processes.
        if not _in_program() or isinstance(value, distribute_values.DistributedValues):
            return super()._reduce_to(reduce_op, value, destinations, options)
        if not self._add_ipu_cross_replica_reductions:
            return value  # PopDistStrategy(add_ipu_cross_replica_reductions=False)
        total = exchange_ops.replica_sum(tf.convert_to_tensor(value))
        if reduce_op == tf.distribute.ReduceOp.MEAN:
            return total / tf.cast(self._all_program_replicas, total.dtype)
        return total

    def _batch_reduce_to(self, reduce_op, value_destination_pairs, options):
        # A replica context's all-reduce (through merge_call) inside a program is the
        # engine's, as `_reduce_to`.
        if not _in_program():
            return super()._batch_reduce_to(reduce_op, value_destination_pairs, options)
        return [self._reduce_to(reduce_op, v, d, options) for v, d in value_destination_pairs]

    def _replica_ctx_all_reduce(self, reduce_op, value, options=None):
        if not _in_program():
            return super()._replica_ctx_all_reduce(reduce_op, value, options)
        return nest.map_structure(lambda v: self._reduce_to(reduce_op, v, None, options), value)

    def cross_process_sum(self, tensor: tf.Tensor) -> tf.Tensor:
        """The sum of `tensor` over the processes (one value each), for the engine's exchange."""
        return self._cross_process(
            lambda launcher, options: launcher.all_reduce(tensor, None, options)
        )

    def cross_process_gather(self, tensor: tf.Tensor) -> tf.Tensor:
        """The processes' `tensor`s concatenated along axis 0, in process order."""
        return self._cross_process(
            lambda launcher, options: launcher.all_gather(tensor, 0, options)
        )

    def _cross_process(self, collective):
        launcher = self._cross_device_ops._launchers[0]  # noqa: SLF001
        options = self._communication_options.merge(collective_util.Options())

        def run():
            with ops.device(self._devices[0]):
                return collective(launcher, options)

        return def_function.function(run)() if context.executing_eagerly() else run()

    def _create_variable(self, next_creator, **kwargs):
        variable = super()._create_variable(next_creator, **kwargs)
        # tf.distribute picks variable classes from a module-wide table; the IPU classes add
        # no state, so the created variable only changes class.
        ipu_class = _IPU_VARIABLE_CLASSES.get(type(variable))
        if ipu_class is not None:
            variable.__class__ = ipu_class
        return variable

    # Whether a deep copy is refused as TensorFlow refuses one of a multi-worker strategy
    # with a health-check thread (see `__deepcopy__`).
    _copy_refused_when_eager_with_cluster = False

    def __deepcopy__(self, memo):
        # TensorFlow (python/distribute/collective_all_reduce_strategy.py:941-956 in the
        # original's tree) refuses the copy only when a health-check thread runs: a strategy
        # built eagerly on a non-empty cluster. The original's IPUMultiWorkerStrategy is one;
        # its PopDistStrategy and IPUHorovodStrategy build on an empty cluster and copy.
        if self._copy_refused:
            raise ValueError(
                "MultiWorkerMirroredStrategy cannot be deep copied in eager mode. If you're "
                "using Estimator and see this error message, call "
                "tf.compat.v1.disable_eager_execution() at the beginning of your program"
            )
        # Otherwise field by field, as TensorFlow's: the collective keys are shared with the
        # copied cross-process reduction through `memo`; the process's collective runtime
        # (`cluster_runtime`) is not a field, so the copy joins the same one.
        cls = type(self)
        result = cls.__new__(cls)
        memo[id(self)] = result
        for name, value in vars(self).items():
            setattr(result, name, copy.deepcopy(value, memo))
        return result
