"""`IPULoggingTensorHook` (spec 21.13.4): logging tensors from inside a device loop.

The tensors leave the loop through an outfeed (the engine's output channel); the hook
dequeues and logs them every N runs, every N seconds, or at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training.basic_session_run_hooks import (
    NeverTriggerTimer,
    SecondOrStepTimer,
)

from openipu._src.engine.outfeed_queue import IPUOutfeedMode, IPUOutfeedQueue
from openipu._src.estimator.session_loop import SessionRunHook


class IPULoggingTensorHook(SessionRunHook):
    """Prints the given tensors every N local steps, every N seconds, or at end."""

    LoggingMode = IPUOutfeedMode

    def __init__(
        self,
        every_n_iter: int | None = None,
        every_n_secs: float | None = None,
        at_end: bool = False,
        formatter: Callable[[dict[str, Any]], str] | None = None,
        logging_mode: IPUOutfeedMode = IPUOutfeedMode.LAST,
    ) -> None:
        # The original's checks and messages (ipu_session_run_hooks.py).
        if every_n_iter is not None and every_n_secs is not None:
            raise ValueError("Cannot provide both every_n_iter and every_n_secs")
        if every_n_iter is None and every_n_secs is None and not at_end:
            raise ValueError("Either every_n_iter, every_n_secs or at_end should be provided")
        only_at_end = at_end and every_n_iter is None and every_n_secs is None
        self._timer = (
            NeverTriggerTimer()
            if only_at_end
            else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        )
        self._log_at_end = at_end
        self._formatter = formatter
        self._outfeed = IPUOutfeedQueue(outfeed_mode=logging_mode)
        self._dequeue: Any = None
        self._iter_count = 0

    def log(self, tensors: Any) -> tf.Operation:
        """Logs `tensors` (a dict of names to tensors, a list of tensors, or a tensor).

        Returns the logging operation, which must run (a control dependency or part of the
        train op) so as not to be pruned.
        """
        if self._outfeed.enqueued:
            raise RuntimeError(
                "Cannot use this hook object's log function more than once. Either enqueue "
                "all tensors in a single log call using a list or dict, or create another hook."
            )
        return self._outfeed.enqueue(self._as_dict(tensors))

    @staticmethod
    def _as_dict(tensors: Any) -> dict[str, Any]:
        if isinstance(tensors, dict):
            return tensors
        if not isinstance(tensors, (list, tuple)):
            tensors = [tensors]
        for tensor in tensors:
            if not tf.is_tensor(tensor):
                raise TypeError(f"Expected `tf.Tensor`, got {type(tensor)}")
        return {tensor.name: tensor for tensor in tensors}

    def begin(self) -> None:
        if not self._outfeed.enqueued:
            raise RuntimeError(
                "This logging hook's outfeed was not enqueued. Did you forget to call the log "
                "function?"
            )
        with tf.device("cpu"):
            self._dequeue = self._outfeed.dequeue()
        self._iter_count = 0

    def end(self, session: Any) -> None:
        if self._log_at_end:
            self._log_values(session.run(self._dequeue))
        self._timer.reset()

    def after_run(self, run_context: Any, run_values: Any) -> None:
        del run_values
        if self._timer.should_trigger_for_step(self._iter_count):
            self._log_values(run_context.session.run(self._dequeue))
        self._iter_count += 1

    def _log_values(self, values: dict[str, Any]) -> None:
        original = np.get_printoptions()
        np.set_printoptions(suppress=True)
        try:
            elapsed, _ = self._timer.update_last_triggered_step(self._iter_count)
            if self._formatter:
                logging.info(self._formatter(values))
            else:
                stats = ", ".join(f"{key} = {value}" for key, value in values.items())
                if elapsed is not None:
                    logging.info("%s (%.3f sec)", stats, elapsed)
                else:
                    logging.info("%s", stats)
        finally:
            np.set_printoptions(**original)
