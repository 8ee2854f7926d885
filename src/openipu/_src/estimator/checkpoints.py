"""An estimator's variables at the start of a session: restored, warm-started or initialized.

Checkpoints are written by `tf.compat.v1.train.Saver` (through `CheckpointSaverHook`):
each checkpoint's files are written under temporary names and merged into place, and the
`checkpoint` index is replaced atomically, so a training killed at any moment leaves the
last complete checkpoint as the latest, from which the next `train` resumes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import tensorflow as tf


def latest_checkpoint(model_dir: str) -> str | None:
    path: str | None = tf.train.latest_checkpoint(model_dir)
    return path


def global_step_of(model_dir: str) -> int:
    """The global step of the latest checkpoint in `model_dir`, 0 without one."""
    path = latest_checkpoint(model_dir)
    if path is None:
        return 0
    try:
        return int(tf.train.load_variable(path, tf.compat.v1.GraphKeys.GLOBAL_STEP))
    except (tf.errors.NotFoundError, ValueError):
        return 0


def warm_start_checkpoint(warm_start_from: Any) -> tuple[str, Any] | None:
    """(checkpoint path or directory, variables to warm-start) of `warm_start_from`.

    A path (a checkpoint, a directory of checkpoints, or a SavedModel directory, whose
    variables are read) warm-starts every trainable variable; an object with the
    attributes of `tf.estimator.WarmStartSettings` says which.
    """
    if warm_start_from is None:
        return None
    if isinstance(warm_start_from, (str, os.PathLike)):
        path, variables = os.fspath(warm_start_from), ".*"
    elif hasattr(warm_start_from, "ckpt_to_initialize_from"):
        path = os.fspath(warm_start_from.ckpt_to_initialize_from)
        variables = getattr(warm_start_from, "vars_to_warm_start", ".*")
    else:
        # The stock Estimator's message.
        raise ValueError(
            "warm_start_from must be a string or a WarmStartSettings, instead got "
            f"{type(warm_start_from)}"
        )
    saved_model_variables = os.path.join(path, "variables", "variables")
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "saved_model.pb")):
        path = saved_model_variables
    return path, variables


def initializer(
    saver: tf.compat.v1.train.Saver, checkpoint: str | None, warm_start: tuple[str, Any] | None
) -> Callable[[tf.compat.v1.Session], None]:
    """Builds (now) and returns how a session's variables start.

    From `checkpoint` if there is one; otherwise initialized, trainable variables being
    warm-started from `warm_start`. Local variables (metrics) always start initialized.
    """
    if checkpoint is None and warm_start is not None:
        path, variables = warm_start
        tf.compat.v1.train.warm_start(path, vars_to_warm_start=variables)
    local_init = tf.group(
        tf.compat.v1.local_variables_initializer(), tf.compat.v1.tables_initializer()
    )
    global_init = tf.compat.v1.global_variables_initializer()

    def initialize(session: tf.compat.v1.Session) -> None:
        if checkpoint is not None:
            saver.restore(session, checkpoint)
        else:
            session.run(global_init)
        session.run(local_init)

    return initialize
