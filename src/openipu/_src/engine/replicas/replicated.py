"""Building a program's R replicas: lock-step threads, each with its own variable copies.

`build(fn, R)` is what the engine calls where a compiled program's replicated part
starts (a region's body, one step of a program): it returns `fn(r)` for every
replica r. Replicated parts nested in it (the body of a device loop shared by the
replicas) reuse the outer part's variable copies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tensorflow.python.framework import ops

from openipu._src.engine.replicas import lockstep
from openipu._src.engine.replicas.variable_copies import ReplicatedVariables

_state = threading.local()


class TooManyReplicas(Exception):
    """The program needs more IPUs per replica than the replica count assumed.

    A program's IPUs per replica are known only once it is built (a pipeline says
    how many IPUs it spans); the builder catches this and builds again with
    `ipus // ipus_per_replica` replicas.
    """

    def __init__(self, ipus_per_replica: int) -> None:
        super().__init__(f"the program needs {ipus_per_replica} IPUs per replica")
        self.ipus_per_replica = ipus_per_replica


def build(fn: Callable[[int], Any], count: int, ipus: int | None = None) -> list[Any]:
    """`[fn(0), ..., fn(count - 1)]`, each built as one replica of the program.

    `ipus` is how many IPUs the program's device has (see `require_ipus_per_replica`).
    """
    if count == 1:
        return lockstep.run_replicas(fn, 1)
    outer: ReplicatedVariables | None = getattr(_state, "variables", None)
    variables = outer or ReplicatedVariables(count, ops.get_default_graph())
    ipus = ipus if ipus is not None else getattr(_state, "ipus", None)

    def in_replica(index: int) -> Any:
        previous = (getattr(_state, "variables", None), getattr(_state, "ipus", None))
        _state.variables, _state.ipus = variables, ipus
        try:
            with variables.replica(index):
                return fn(index)
        finally:
            _state.variables, _state.ipus = previous

    results = lockstep.run_replicas(in_replica, count)
    if outer is None:
        variables.finish()
    return results


def require_ipus_per_replica(count: int) -> None:
    """Called by code that spans `count` IPUs (a pipeline): too many replicas are rebuilt."""
    replicas = lockstep.replica_count()
    ipus = getattr(_state, "ipus", None)
    if replicas > 1 and ipus is not None and replicas * count > ipus:
        raise TooManyReplicas(count)
