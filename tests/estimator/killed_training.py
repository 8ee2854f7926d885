"""Child process of `test_resume_after_kill.py`: trains an IPUEstimator to step 20.

Usage: python killed_training.py MODEL_DIR KILL_AT_RUN
With KILL_AT_RUN > 0 the process kills itself (SIGKILL, no clean-up) in the middle of
that session run's hooks, after the device loop ran but before its checkpoint is written.
Prints the global step it started from and its session runs, as JSON, when it finishes.
"""

from __future__ import annotations

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402
from estimator_models import dense_loss, regression_data  # noqa: E402
from tensorflow.python.ipu import ipu_estimator, ipu_run_config  # noqa: E402

v1 = tf.compat.v1


class KillAt(v1.train.SessionRunHook):
    def __init__(self, run: int) -> None:
        self.run = run
        self.runs = 0
        self.start_step = None

    def after_create_session(self, session, coord):
        self.start_step = int(session.run(v1.train.get_global_step()))

    def after_run(self, run_context, run_values):
        self.runs += 1
        if self.runs == self.run:
            os.kill(os.getpid(), signal.SIGKILL)


def model_fn(features, labels, mode):
    loss = dense_loss(features, labels)
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return ipu_estimator.IPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def input_fn():
    # 16 samples in batches of 4: one pass per device loop of 4 steps, so a training that
    # resumes at a loop boundary reads what an uninterrupted one would.
    x, y = regression_data(num_samples=16)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True).repeat()


def main() -> None:
    model_dir, kill_at = sys.argv[1], int(sys.argv[2])
    config = ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(iterations_per_loop=4),
        save_checkpoints_steps=4,
    )
    estimator = ipu_estimator.IPUEstimator(model_fn=model_fn, model_dir=model_dir, config=config)
    hook = KillAt(kill_at)
    estimator.train(input_fn, max_steps=20, hooks=[hook])
    print(json.dumps({"start_step": hook.start_step, "runs": hook.runs}))


if __name__ == "__main__":
    main()
