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

A run of a distributed session (a gRPC target) that executes a function holding a
collective (a multi-worker pipeline's all-reduce in its repeat loop) declares a collective
graph key, which TensorFlow's master misses there (`collective_graph_key.py`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from openipu._src.integration import collective_graph_key
from openipu._src.integration.patching import Kind, Patch, apply, register

#: (order, hook): `hook(session, run)` is called before a run, `run(fetches)` being the
#: stock run of that session (hooks' own runs do not call the hooks again).
BeforeRun = Callable[[Any, Callable], None]
_hooks: list[tuple[int, BeforeRun]] = []
_state = threading.local()
#: Session.run(fetches, feed_dict, options, run_metadata)
_FEED_POSITION, _OPTIONS_POSITION = 1, 2


def _argument(args: tuple, kwargs: dict, position: int, name: str) -> Any:
    return args[position] if len(args) > position else kwargs.get(name)


def _with_collective_key(session, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The run's arguments, declaring a collective graph key when the run needs one."""
    if not session.sess_str or not args:
        return args, kwargs
    options = _argument(args, kwargs, _OPTIONS_POSITION, "options")
    if options is not None and options.experimental.collective_graph_key:
        return args, kwargs
    feed_dict = _argument(args, kwargs, _FEED_POSITION, "feed_dict")
    if not collective_graph_key.run_needs_key(session.graph, args[0], feed_dict):
        return args, kwargs
    from tensorflow.core.protobuf import config_pb2

    declared = config_pb2.RunOptions()
    if options is not None:
        declared.CopyFrom(options)
    declared.experimental.collective_graph_key = collective_graph_key.COLLECTIVE_GRAPH_KEY
    if len(args) > _OPTIONS_POSITION:
        return (*args[:_OPTIONS_POSITION], declared, *args[_OPTIONS_POSITION + 1 :]), kwargs
    return args, {**kwargs, "options": declared}


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
        args, kwargs = _with_collective_key(self, args, kwargs)
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
        "replicas' variable copies), as the original needs no initializer for them; a "
        "distributed session's run that executes a loop holding collectives declares them",
        tensorflow=("2.21",),
    )
)


def add_before_run(hook: BeforeRun, order: int) -> None:
    """Calls `hook(session, run)` before every session run, hooks of lower `order` first."""
    if all(existing is not hook for _, existing in _hooks):
        _hooks.append((order, hook))
        _hooks.sort(key=lambda entry: entry[0])
    apply(SESSION_RUN)


def install() -> None:
    """Applies the patch (idempotent): for the collective key of distributed sessions'
    runs even when no hook is added."""
    apply(SESSION_RUN)
