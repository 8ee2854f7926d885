"""The estimators' session loop: a TF1 session driving `SessionRunHook`s.

What `tf.compat.v1.train.MonitoredSession` does for the stock estimator, without
finalizing the graph (the engine may still add its own state when the first session
runs: `integration/session_run.py`): create the session, restore the latest checkpoint
or initialize (and warm-start), call the hooks around every run with their requests
merged into the run, stop when a hook asks or the input ends, and call `end`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import tensorflow as tf
from tensorflow.python.training import session_run_hook
from tensorflow.python.training.session_run_hook import SessionRunHook


class HookedSession:
    """One session whose runs go through `hooks`; `stop_requested` after a hook asked."""

    def __init__(self, session: tf.compat.v1.Session, hooks: Sequence[SessionRunHook]) -> None:
        self.session = session
        self.hooks = list(hooks)
        self.stop_requested = False

    def run(self, fetches: Any, feed_dict: dict | None = None) -> Any:
        """`session.run(fetches)`, with the hooks' requests run alongside."""
        original = session_run_hook.SessionRunArgs(fetches=fetches, feed_dict=feed_dict)
        context = session_run_hook.SessionRunContext(original, self.session)
        requests = [hook.before_run(context) for hook in self.hooks]
        feeds = dict(feed_dict or {})
        hook_fetches: dict[int, Any] = {}
        options = tf.compat.v1.RunOptions()
        for index, request in enumerate(requests):
            if request is None:
                continue
            if request.fetches is not None:
                hook_fetches[index] = request.fetches
            for key, value in (request.feed_dict or {}).items():
                if key in feeds:
                    # MonitoredSession's message (monitored_session.py).
                    raise RuntimeError(f"Same tensor is fed by two hooks. Conflict(s): {[key]}")
                feeds[key] = value
            if request.options is not None:
                options.MergeFrom(request.options)
        metadata = tf.compat.v1.RunMetadata()
        results = self.session.run(
            {"caller": fetches, "hooks": hook_fetches},
            feed_dict=feeds or None,
            options=options,
            run_metadata=metadata,
        )
        for index, hook in enumerate(self.hooks):
            result = results["hooks"].get(index)
            hook.after_run(
                context,
                session_run_hook.SessionRunValues(
                    results=result, options=options, run_metadata=metadata
                ),
            )
        self.stop_requested = self.stop_requested or context.stop_requested
        return results["caller"]


@contextlib.contextmanager
def hooked_session(
    hooks: Sequence[SessionRunHook],
    initialize: Any,
    session_config: Any = None,
    after_create: Sequence[Any] = (),
    target: str = "",
) -> Iterator[HookedSession]:
    """A session for the default graph, set up by `initialize(session)`, driving `hooks`.

    `hooks[i].begin()` runs before the session exists (hooks may add ops), then
    `initialize`, the ops in `after_create` (the infeed's initializer), and each hook's
    `after_create_session`; on leaving without an error (the end of the input counts as
    none), each hook's `end`. `target` is the server to run on (`RunConfig.master` of
    distributed training; in-process by default).
    """
    for hook in hooks:
        hook.begin()
    with tf.compat.v1.Session(target=target, config=session_config) as session:
        initialize(session)
        if after_create:
            session.run(list(after_create))
        for hook in hooks:
            hook.after_create_session(session, None)
        hooked = HookedSession(session, hooks)
        try:
            yield hooked
        except (tf.errors.OutOfRangeError, StopIteration):
            pass  # the input is exhausted: a normal end, as MonitoredSession's
        for hook in hooks:
            hook.end(session)
