"""AssumeEqualAcrossReplicas: identity on tensors and structures, `inplace` kept in the config."""

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.keras.layers import AssumeEqualAcrossReplicas


@pytest.mark.parametrize("inplace", [False, True])
def test_returns_its_inputs(inplace):
    structure = (tf.constant([1.0, 2.0]), [tf.constant(3)])
    got = AssumeEqualAcrossReplicas(inplace=inplace)(structure)
    tf.nest.assert_same_structure(got, structure)
    for ours, theirs in zip(tf.nest.flatten(got), tf.nest.flatten(structure), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_in_a_compiled_function_with_gradients():
    layer = AssumeEqualAcrossReplicas()
    x = tf.constant([1.0, 2.0])
    np.testing.assert_array_equal(tf.function(layer, jit_compile=True)(x), x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(layer(x) ** 2)
    np.testing.assert_allclose(tape.gradient(y, x), [2.0, 4.0])


def test_config_round_trip_and_output_shape():
    layer = AssumeEqualAcrossReplicas(inplace=True)
    config = layer.get_config()
    assert config["inplace"] is True
    assert AssumeEqualAcrossReplicas.from_config(config).get_config() == config
    assert layer.compute_output_shape((None, 3)) == (None, 3)
