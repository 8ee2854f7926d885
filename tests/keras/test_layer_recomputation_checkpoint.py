"""RecomputationCheckpoint: identity on tensors and structures, gradients unchanged."""

import numpy as np
import tensorflow as tf

from openipu._src.keras.layers import RecomputationCheckpoint


def test_returns_its_inputs_structure():
    structure = {"a": tf.constant([1.0, 2.0]), "b": [tf.constant(3.0), tf.constant([[4]])]}
    got = RecomputationCheckpoint()(structure)
    tf.nest.assert_same_structure(got, structure)
    for ours, theirs in zip(tf.nest.flatten(got), tf.nest.flatten(structure), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_gradients_are_those_without_the_checkpoint():
    x = tf.constant([0.5, -1.0, 2.0])
    layer = RecomputationCheckpoint()
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf.sin(layer(x * 2.0)))
    np.testing.assert_allclose(tape.gradient(y, x), 2.0 * np.cos(2.0 * x.numpy()), rtol=1e-6)
    np.testing.assert_array_equal(tf.function(layer, jit_compile=True)(x), x)


def test_config_and_output_shape():
    layer = RecomputationCheckpoint(name="checkpoint")
    assert layer.compute_output_shape((None, 4)) == (None, 4)
    assert (
        RecomputationCheckpoint.from_config(layer.get_config()).get_config() == layer.get_config()
    )
