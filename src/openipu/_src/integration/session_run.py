"""Patch: TF1 `Session.run` first initializes the engine's own variables of its graph.

Target: `tensorflow.python.client.session.BaseSession.run` (a method), TensorFlow 2.21;
every `tf.compat.v1.Session.run` and `InteractiveSession.run` goes through it.

Why: programs written for the original run an IPU program without initializing
anything of the engine's: its outfeeds are device queues, not variables
(tensorflow/python/ipu/ipu_outfeed_queue.py), and a replica's copies of the weights
are Poplar buffers. Here such state (outfeed buffers, replicas' variable copies,
gradient accumulators) lives in resource variables that `global_variables_initializer`
does not cover (`engine.engine_variables` keeps them out of the user's collections, so
savers and initializers never see them); before a session runs anything, the variables
of this kind that the session has not yet initialized are initialized.

Programs built before `configure_ipu_system` (as the original allows) are finished before
the first session runs their graph, when the device and so their replicas are known
(`engine/deferred_builds.py`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from openipu._src.integration.patching import Kind, Patch, apply, register

#: (order, hook): `hook(session, run)` is called before a run, `run(fetches)` being the
#: stock run of that session (hooks' own runs do not call the hooks again).
BeforeRun = Callable[[Any, Callable], None]
_hooks: list[tuple[int, BeforeRun]] = []
_state = threading.local()


def _replacement(stock: Callable) -> Callable:
    @functools.wraps(stock)
    def run(self, *args, **kwargs):
        if _hooks and not getattr(_state, "busy", False):
            _state.busy = True
            try:
                for _, hook in list(_hooks):
                    hook(self, functools.partial(stock, self))
            finally:
                _state.busy = False
        return stock(self, *args, **kwargs)

    return run


SESSION_RUN = register(
    Patch(
        module="tensorflow.python.client.session",
        attribute="BaseSession.run",
        kind=Kind.METHOD,
        replacement=_replacement,
        reason="before a TF1 session runs, the engine finishes programs built before the IPU "
        "system was configured and initializes its own state variables (outfeed buffers, "
        "replicas' variable copies), as the original needs no initializer for them",
        tensorflow=("2.21",),
    )
)


def add_before_run(hook: BeforeRun, order: int) -> None:
    """Calls `hook(session, run)` before every session run, hooks of lower `order` first."""
    if all(existing is not hook for _, existing in _hooks):
        _hooks.append((order, hook))
        _hooks.sort(key=lambda entry: entry[0])
    apply(SESSION_RUN)
