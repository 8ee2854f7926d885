"""Conformance: graphcore/keras `keras/ipu/feed_options_test.py`.

Infeed and outfeed queue options set on a model are used by predict and kept by
`model.save` / `keras.models.load_model` (the original's private `_infeed_kwargs` and
`_outfeed_kwargs` of the restored model).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras


def _sequential():
    return keras.Sequential(
        [
            keras.layers.Flatten(input_shape=(4, 4)),
            keras.layers.Dense(10, activation="softmax", kernel_initializer="ones"),
        ]
    )


def _functional():
    inputs = keras.layers.Input((4, 4))
    x = keras.layers.Flatten()(inputs)
    return keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(x))


@pytest.mark.follows("testOptions")
@pytest.mark.parametrize("model_fn", [_sequential, _functional])
def test_options(strategy_on, tmp_path, model_fn):
    strategy = strategy_on(1)
    x = np.random.default_rng(0).uniform(size=(16, 4, 4, 1)).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(2, drop_remainder=True).repeat()
    steps = 8
    with strategy.scope():
        model = model_fn()
        model.compile(steps_per_execution=steps)
        model.set_infeed_queue_options(prefetch_depth=2)
        model.set_outfeed_queue_options(buffer_depth=2)
        result = model.predict(dataset, steps=steps, verbose=0)
        np.testing.assert_allclose(
            result, model_fn_reference(model, x[: 2 * steps]), rtol=1e-5, atol=1e-6
        )
        path = str(tmp_path / "model")
        model.save(path)
        restored = keras.models.load_model(path)
        assert restored._infeed_kwargs == {"prefetch_depth": 2}
        assert restored._outfeed_kwargs == {"buffer_depth": 2}


def model_fn_reference(model, x):
    """The same model's outputs computed by stock Keras outside the IPU."""
    weights = model.get_weights()
    flat = x.reshape(len(x), -1)
    logits = flat @ weights[0] + weights[1]
    return tf.nn.softmax(logits).numpy()
