"""Workers of an in-process cluster as threads, as the original's `MultiWorkerTestBase`.

`create(num_workers)` starts gRPC servers on free loopback ports (they cannot be stopped:
make one cluster per module); `run_between_graph_clients` runs one function per worker,
each in its own thread and TF1 graph, with a deadline so a collective that never
completes fails the test instead of hanging it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import tensorflow as tf
from tensorflow.python.distribute import multi_worker_test_base, multi_worker_util
from tensorflow.python.distribute.cluster_resolver.cluster_resolver import SimpleClusterResolver

DEADLINE = 120  # seconds for every worker of a scenario


def _free_port() -> int:
    # `multi_worker_test_base` picks ports with portpicker, which is not installed.
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def create(num_workers: int) -> dict:
    """The cluster spec of `num_workers` started in-process servers (no chief, no ps)."""
    with mock.patch.object(multi_worker_test_base, "pick_unused_port", _free_port):
        return multi_worker_test_base.create_in_process_cluster(
            num_workers=num_workers, num_ps=0, has_chief=False
        )


def resolver(cluster_spec: dict, task_type: str, task_id: int) -> SimpleClusterResolver:
    return SimpleClusterResolver(
        cluster_spec=multi_worker_util.normalize_cluster_spec(cluster_spec),
        task_type=task_type,
        task_id=task_id,
    )


def run_between_graph_clients(fn: Callable[[str, int], Any], cluster_spec: dict) -> dict:
    """`fn(task_type, task_id)` of every worker, each in its own thread and graph."""
    results: dict = {}
    errors: dict = {}

    def client(task_id: int) -> None:
        try:
            with tf.Graph().as_default():
                results[task_id] = fn("worker", task_id)
        except BaseException as error:  # reported by the test's thread
            errors[task_id] = error

    threads = [
        threading.Thread(target=client, args=(task_id,), daemon=True)
        for task_id in range(len(cluster_spec["worker"]))
    ]
    for thread in threads:
        thread.start()
    # Until every worker is done, one failed (its peers may wait for it forever), or the
    # deadline passed.
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline and not errors and any(t.is_alive() for t in threads):
        time.sleep(0.05)
    hung = [task_id for task_id, thread in enumerate(threads) if thread.is_alive()]
    if errors:
        raise errors[min(errors)]
    assert not hung, f"workers {hung} did not finish within {DEADLINE} s"
    return results
