"""`IPULoggingTensorHook`: tensors of a device loop logged through an outfeed (the original's
ipu_session_run_hooks_test.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ipu import ipu_estimator, ipu_run_config
from tensorflow.python.ipu.ipu_session_run_hooks import IPULoggingTensorHook

v1 = tf.compat.v1


def _train_logging(hook: IPULoggingTensorHook, steps: int = 4) -> None:
    def model_fn(features, labels, mode):
        loss = tf.reduce_sum(features + labels, name="loss")
        log = hook.log({"loss": loss, "features": features})
        with tf.control_dependencies([log]):
            train_op = tf.identity(loss)
        return ipu_estimator.IPUEstimatorSpec(
            mode=mode, loss=loss, train_op=train_op, training_hooks=[hook]
        )

    def input_fn():
        values = tf.data.Dataset.range(10).map(lambda i: tf.fill([1], tf.cast(i, tf.float32)))
        return tf.data.Dataset.zip((values, values)).repeat()

    config = ipu_run_config.RunConfig(
        ipu_run_config=ipu_run_config.IPURunConfig(iterations_per_loop=2)
    )
    ipu_estimator.IPUEstimator(model_fn=model_fn, config=config).train(input_fn, steps=steps)


@pytest.mark.parametrize(
    "mode", [IPULoggingTensorHook.LoggingMode.LAST, IPULoggingTensorHook.LoggingMode.ALL]
)
def test_logs_the_tensors_of_each_run(mode):
    logged = []
    hook = IPULoggingTensorHook(
        every_n_iter=1, formatter=lambda v: logged.append(v) or "", logging_mode=mode
    )
    _train_logging(hook)
    assert len(logged) == 2  # once per session run (a loop of two steps)
    losses = [np.ravel(entry["loss"]).tolist() for entry in logged]
    if mode is IPULoggingTensorHook.LoggingMode.LAST:
        assert losses == [[2.0], [6.0]]  # each loop's last step: 2 * 1, 2 * 3
    else:
        assert losses == [[0.0, 2.0], [4.0, 6.0]]


def test_logs_at_end_only():
    logged = []
    hook = IPULoggingTensorHook(at_end=True, formatter=lambda v: logged.append(v) or "")
    _train_logging(hook)
    assert len(logged) == 1
    assert np.ravel(logged[0]["loss"]).tolist() == [6.0]


def test_arguments_are_checked_as_the_original():
    with pytest.raises(ValueError, match="Cannot provide both every_n_iter and every_n_secs"):
        IPULoggingTensorHook(every_n_iter=1, every_n_secs=1)
    with pytest.raises(ValueError, match="Either every_n_iter, every_n_secs or at_end"):
        IPULoggingTensorHook()
    hook = IPULoggingTensorHook(every_n_iter=1)
    with pytest.raises(RuntimeError, match="Did you forget to call the log function"):
        hook.begin()
    with tf.Graph().as_default():
        hook.log(tf.constant(1.0))
        with pytest.raises(RuntimeError, match="log function more than once"):
            hook.log(tf.constant(1.0))
        with pytest.raises(TypeError, match="Expected `tf.Tensor`"):
            IPULoggingTensorHook(every_n_iter=1).log([1.0])
