"""`tf.keras.callbacks.TensorBoard` in a Keras fit on an IPUStrategy, as IPU programs use it:
the event files it writes hold the epoch losses that fit returns."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.python import ipu


def _epoch_scalars(log_dir, tag):
    """The values of scalar `tag` in every event file under `log_dir`, by step."""
    values = {}
    for path in tf.io.gfile.glob(f"{log_dir}/**/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(tf.make_ndarray(value.tensor))
    return values


def test_tensorboard_callback_writes_the_epoch_losses(tmp_path):
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    try:
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 4)).astype(np.float32)
        y = rng.normal(size=(64, 1)).astype(np.float32)
        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
            model.compile(tf.keras.optimizers.SGD(0.1), "mse", steps_per_execution=4)
            board = tf.keras.callbacks.TensorBoard(log_dir=str(tmp_path / "logs"))
            history = model.fit(x, y, batch_size=8, epochs=3, callbacks=[board], verbose=0)
    finally:
        ipu.config.reset_ipu_configuration()

    written = _epoch_scalars(tmp_path / "logs", "epoch_loss")
    assert sorted(written) == [0, 1, 2]
    np.testing.assert_allclose(
        [written[epoch] for epoch in range(3)], history.history["loss"], rtol=1e-6
    )
