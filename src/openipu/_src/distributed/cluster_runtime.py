"""This process's place in the cluster: TensorFlow's collective runtime, started once.

TensorFlow wants multi-worker collectives configured before its runtime
starts, but importing the IPU module already starts it (the emulated IPUs
are logical devices made at import). Enabling the collectives later works
(the server and the coordination service, whose heartbeats abort collectives
when a peer dies, start then); only the early configuration call refuses.
Its settings (the collective group leader, device filters) also travel in
the server's session configuration, so the call is skipped.

The runtime is a stock `MultiWorkerMirroredStrategy`, created once per
process and kept: it owns the server. Strategies created afterwards join it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Iterator

from tensorflow.python.distribute import collective_all_reduce_strategy
from tensorflow.python.distribute.cluster_resolver import tfconfig_cluster_resolver

from openipu._src.distributed import environment
from openipu._src.integration import eager_collectives
from openipu._src.system import host_devices


@dataclasses.dataclass(frozen=True)
class ClusterRuntime:
    """The started collective runtime of this process."""

    cluster: dict
    task_type: str
    task_id: int
    owner: object  # the strategy that started the server; kept alive with it

    @property
    def process_count(self) -> int:
        return sum(len(tasks) for job, tasks in self.cluster.items() if job in ("chief", "worker"))

    @property
    def host_device(self) -> str:
        return f"/job:{self.task_type}/replica:0/task:{self.task_id}/device:CPU:0"


class _RuntimeStrategy(collective_all_reduce_strategy.CollectiveAllReduceStrategy):
    # Its collective keys must not meet those of the strategies a program creates.
    _collective_key_base = 1_000_000


_lock = threading.RLock()
_runtime: ClusterRuntime | None = None


def resolver(cluster_resolver=None):
    """`cluster_resolver`, or the cluster of `TF_CONFIG` (which `poprun` sets)."""
    if cluster_resolver is not None:
        return cluster_resolver
    environment.cluster_from_tf_config()  # reports malformed JSON clearly
    return tfconfig_cluster_resolver.TFConfigClusterResolver()


def is_multi_process(cluster_resolver) -> bool:
    """Whether the cluster has more than one worker task (one task runs on its own)."""
    spec = cluster_resolver.cluster_spec().as_dict()
    return sum(len(_tasks(spec, job)) for job in ("chief", "worker")) > 1


def start(cluster_resolver=None) -> ClusterRuntime | None:
    """Starts this process's collective runtime if the cluster has several processes.

    Idempotent; a second, different cluster in one process is an error.
    """
    global _runtime
    # The emulated IPUs' devices must exist before the runtime starts TensorFlow.
    host_devices.ensure_logical_devices()
    cluster_resolver = resolver(cluster_resolver)
    if not is_multi_process(cluster_resolver):
        return None
    cluster = {
        job: _tasks(cluster_resolver.cluster_spec().as_dict(), job) for job in ("chief", "worker")
    }
    cluster = {job: tasks for job, tasks in cluster.items() if tasks}
    task_type, task_id = cluster_resolver.task_type, cluster_resolver.task_id
    with _lock:
        if _runtime is not None:
            if (_runtime.cluster, _runtime.task_type, _runtime.task_id) != (
                cluster,
                task_type,
                task_id,
            ):
                raise ValueError(
                    f"This process already joined the cluster {_runtime.cluster} as "
                    f"{_runtime.task_type} {_runtime.task_id}; it cannot join {cluster} as "
                    f"{task_type} {task_id} too"
                )
            return _runtime
        with configurable_after_startup():
            owner = _RuntimeStrategy(cluster_resolver=cluster_resolver)
        logging.getLogger("tensorflow").addFilter(_InstanceKeyPlaceholders())
        _runtime = ClusterRuntime(cluster, task_type, int(task_id), owner)
        return _runtime


def current() -> ClusterRuntime | None:
    return _runtime


@contextlib.contextmanager
def configurable_after_startup() -> Iterator[None]:
    """Within this context, multi-worker strategies can be built after TensorFlow started."""
    # The strategy's configuration of collectives on the eager context is skipped: the
    # server's session configuration carries it (integration/eager_collectives.py).
    with _lock, _quiet_late_start_warnings(), eager_collectives.configuration_skipped():
        yield


class _LateStartWarnings(logging.Filter):
    """Hides TensorFlow's warnings that a late start may not work: it does, here."""

    _MESSAGES = ("may not be effective", "after program startup")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(part in message for part in self._MESSAGES)


class _InstanceKeyPlaceholders(logging.Filter):
    """Hides the XLA context's complaint about the collectives' instance-key placeholders.

    Collectives take their instance keys at call time through placeholders; a region
    traced in the XLA context first logs them as unsupported, then runs as a graph
    (see `engine.compile_policy`), where they work.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("Operation of type Placeholder") and "XLA" in message)


@contextlib.contextmanager
def _quiet_late_start_warnings() -> Iterator[None]:
    loggers = [logging.getLogger("tensorflow"), logging.getLogger("absl")]
    quiet = _LateStartWarnings()
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


def _tasks(spec: dict, job: str) -> list:
    tasks = spec.get(job, [])
    # A job's tasks may be given as a list or as {index: address}.
    return [tasks[k] for k in sorted(tasks)] if isinstance(tasks, dict) else list(tasks)
