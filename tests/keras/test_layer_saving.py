"""Models using every IPU layer save and load (h5, SavedModel, .keras) without custom_objects."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tensorflow.python import ipu

from openipu._src.keras import layers


def _model():
    ids = tf_keras.Input((6,), batch_size=4, dtype=tf.int32)
    x = layers.Embedding(10, 8, serialization_factor=2)(ids)
    x = layers.LayerNormalization(axis=[1, 2])(x)
    x = layers.GroupNormalization(groups=2, strided_channel_grouping=False)(x)
    x = layers.InstanceNormalization()(x)
    x = layers.Dropout(0.5)(x)
    x = layers.Dropout(0.2, seed=[1, 2], noise_shape=[None, 1, None])(x)
    x = layers.RecomputationCheckpoint()(x)
    x = layers.AssumeEqualAcrossReplicas(inplace=True)(x)
    return tf_keras.Model(ids, tf_keras.layers.Dense(3)(x))


@pytest.mark.slow
@pytest.mark.parametrize("file_name", ["model.h5", "saved_model", "model.keras"])
def test_save_and_load(ipu_system, tmp_path, file_name):
    # On the IPU, whose steps have static shapes: stock Keras' steps have a batch of None,
    # which the layer normalisation refuses as the original's does.
    strategy = ipu.ipu_strategy.IPUStrategy()
    ids = np.random.default_rng(0).integers(0, 10, size=(4, 6)).astype(np.int32)
    with strategy.scope():
        model = _model()
        model.compile(optimizer="sgd", loss="mse")
        model.fit(ids, np.zeros((4, 6, 3), np.float32), batch_size=4, epochs=1, verbose=0)
        expected = model.predict(ids, batch_size=4, verbose=0)
        path = str(tmp_path / file_name)
        model.save(path)
        loaded = tf_keras.models.load_model(path)
        predicted = loaded.predict(ids, batch_size=4, verbose=0)
    assert [type(layer) for layer in loaded.layers] == [type(layer) for layer in model.layers]
    assert [layer.get_config() for layer in loaded.layers[1:]] == [
        layer.get_config() for layer in model.layers[1:]
    ]
    np.testing.assert_allclose(predicted, expected, rtol=1e-6)


def test_layers_are_registered_under_the_openipu_package():
    for name in layers.__all__:
        registered = tf_keras.utils.get_registered_name(getattr(layers, name))
        assert registered == f"openipu>{getattr(layers, name).__name__}"
