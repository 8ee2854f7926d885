"""The processes a replicated program spans, found on the current strategy.

A strategy spanning processes (`distributed`, a front end the engine does not
import) runs each process's replicas as replicas of its programs; their
exchanges combine the local replicas, then the processes' results. The engine
finds the cross-process stage by duck typing on the strategy's `extended`, as it
finds `ipu_ordinal`: `process_count`, `process_index`, `cross_process_sum(t)`
(the sum of one tensor per process) and `cross_process_gather(t)` (their
concatenation along axis 0, in process order).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Processes:
    """This process among `count`, and the strategy internals that reduce across them."""

    index: int
    count: int
    extended: Any

    def sum(self, tensor: tf.Tensor) -> tf.Tensor:
        return self.extended.cross_process_sum(tensor)

    def gather(self, tensor: tf.Tensor) -> tf.Tensor:
        return self.extended.cross_process_gather(tensor)


def current() -> Processes | None:
    """The processes of the current strategy, or None when it runs in one process."""
    extended = tf.distribute.get_strategy().extended
    count = int(getattr(extended, "process_count", 1))
    if count <= 1 or not hasattr(extended, "cross_process_sum"):
        return None
    return Processes(int(extended.process_index), count, extended)


def index() -> int:
    processes = current()
    return 0 if processes is None else processes.index


def count() -> int:
    processes = current()
    return 1 if processes is None else processes.count
