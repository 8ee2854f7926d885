"""A session-run hook the estimator conformance modules share (the originals' `_SessionRunCounter`)."""

from __future__ import annotations

import tensorflow as tf


class SessionRunCounter(tf.compat.v1.train.SessionRunHook):
    """Counts the session runs it sees."""

    def __init__(self) -> None:
        self.num_session_runs = 0

    def after_run(self, run_context, run_values) -> None:
        self.num_session_runs += 1
