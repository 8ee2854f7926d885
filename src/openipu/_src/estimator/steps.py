"""Counting an estimator's steps: the global step, stopping, batch sizes per replica."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from openipu._src.estimator.session_loop import SessionRunHook

HOST_DEVICE = "/device:CPU:0"


class GlobalStepCounterAndStopHook(SessionRunHook):
    """Adds `iterations_per_loop` to the global step after each run; stops at the last step.

    The device loop runs `iterations_per_loop` steps per session run, so the host counts
    them (the original's _IPUGlobalStepCounterAndStopHook): a model must not increment
    the global step itself.
    """

    def __init__(self, iterations_per_loop: int, num_steps: int | None, final_step: int | None):
        # The original's checks and messages.
        if num_steps is None and final_step is None:
            raise ValueError("One of `num_steps` or `final_step` must be specified.")
        if num_steps is not None and final_step is not None:
            raise ValueError("Only one of `num_steps` or `final_step` can be specified.")
        self._iterations_per_loop = iterations_per_loop
        self._num_steps = num_steps
        self._final_step = final_step
        self._global_step: Any = None
        self._increment: Any = None

    def begin(self) -> None:
        self._global_step = tf.compat.v1.train.get_global_step()
        with tf.device(HOST_DEVICE):
            self._increment = self._global_step.assign_add(self._iterations_per_loop)

    def after_create_session(self, session: Any, coord: Any) -> None:
        step = session.run(self._global_step)
        if self._final_step is None:
            assert self._num_steps is not None
            self._final_step = step + self._num_steps
        elif step >= self._final_step:
            # Already there (a resumed training that had finished): nothing to run.
            self._final_step = step

    def after_run(self, run_context: Any, run_values: Any) -> None:
        step = run_context.session.run(self._increment)
        assert self._final_step is not None
        if step >= self._final_step:
            run_context.request_stop()


def local_batch_size(
    global_batch_size: int | None, num_workers: int, num_replicas: int, name: str
) -> int | None:
    """The batch size one replica of one worker reads (the original's _calc_batch_size)."""
    if global_batch_size is None:
        return None
    if global_batch_size < 1:
        raise ValueError(f"{name} (got {global_batch_size}) must be positive")
    batch_size, remainder = divmod(global_batch_size, num_workers * num_replicas)
    if remainder != 0:
        raise ValueError(
            f"{name} (got {global_batch_size}) must be divisible by num_workers * "
            f"num_replicas ({num_workers} * {num_replicas})"
        )
    return batch_size
