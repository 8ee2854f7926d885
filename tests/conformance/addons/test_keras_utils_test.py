"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/experimental/auto_pipeline/utils/keras_utils_test.py`.

`keras_utils.parse_model_intermediate` gives, per layer invocation of a model built
under an IPUStrategy, the bytes carried over it, alive before it and alive after it
(worked out by hand for chains, residual connections and attention);
`get_assignment_layer_type` tells invocations that compute alike (same class, argument
and weight shapes, config up to initializers and float constants) from those that do
not.
"""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras
from tf_keras import layers

from ipu_tensorflow_addons.keras.experimental.auto_pipeline.utils import keras_utils


@pytest.fixture
def strategy(strategy_on):
    return strategy_on(1)


def _chain():
    x0 = layers.Input(shape=(2048,))
    x = x0
    for _ in range(4):
        x = layers.Dense(1024)(x)
    return keras.Model(x0, layers.Dense(16)(x))


def _residual():
    x0 = layers.Input(shape=(2048,))
    x1 = layers.Dense(1024)(x0)
    x2 = layers.Dense(1024)(x1)
    x3 = layers.Dense(1024)(x2)
    return keras.Model(x0, layers.Dense(16)(x1 + x3))


def _attention(residual):
    x0 = layers.Input(shape=(128, 768))
    x1 = layers.MultiHeadAttention(num_heads=2, key_dim=768 // 2)(x0, x0, x0)
    return keras.Model(x0, x0 + x1 if residual else x1)


FLOAT_ROWS = 16 * 4  # batch 16, four bytes a float
ATTENTION_ROWS = 16 * 768 * 4
INTERMEDIATE_CASES = {
    "chain": (
        _chain,
        [0, 0, 0, 0, 0],
        np.array([2048, 1024, 1024, 1024, 1024]) * FLOAT_ROWS,
        np.array([1024, 1024, 1024, 1024, 16]) * FLOAT_ROWS,
    ),
    # x1 is read again by the sum: it is carried over the second and third Dense.
    "residual": (
        _residual,
        np.array([0, 1024, 1024, 0, 0]) * FLOAT_ROWS,
        np.array([2048, 1024, 2048, 2048, 1024]) * FLOAT_ROWS,
        np.array([1024, 2048, 2048, 1024, 16]) * FLOAT_ROWS,
    ),
    "bert_attention": (
        lambda: _attention(residual=True),
        np.array([128, 0]) * ATTENTION_ROWS,
        np.array([128, 256]) * ATTENTION_ROWS,
        np.array([256, 128]) * ATTENTION_ROWS,
    ),
    "attention": (
        lambda: _attention(residual=False),
        [0],
        np.array([128]) * ATTENTION_ROWS,
        np.array([128]) * ATTENTION_ROWS,
    ),
}


@pytest.mark.follows("testAll")
@pytest.mark.parametrize("case", INTERMEDIATE_CASES)
def test_parse_model_intermediate(strategy, case):
    create_model, *expected = INTERMEDIATE_CASES[case]
    with strategy.scope():
        got = keras_utils.parse_model_intermediate(create_model(), 16)
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def _dense_variants():
    inputs = layers.Input(shape=(2048,))
    x0 = layers.Dense(1024)(inputs)
    x1 = layers.Dense(1024, activation="relu")(x0)
    x2 = layers.Dense(1024, activation="softmax")(x1)
    x3 = layers.Dense(1024, activation="relu", kernel_initializer="constant")(x2)
    x4 = layers.Dense(1024, activation="relu", use_bias=False)(x3)
    return keras.Model(inputs, layers.Dense(16)(x4))


def _normalizations():
    inputs = layers.Input(shape=(128, 768))
    x0 = layers.MultiHeadAttention(num_heads=2, key_dim=768 // 2)(inputs, inputs, inputs)
    x1 = layers.LayerNormalization(epsilon=1e-6)(x0)
    return keras.Model(inputs, layers.LayerNormalization(epsilon=1e-10)(x1))


LAYER_TYPE_CASES = {
    "input_shape": (_dense_variants, 0, 1, False),
    "activation": (_dense_variants, 1, 2, False),
    "initializer": (_dense_variants, 1, 3, True),
    "use_bias": (_dense_variants, 1, 4, False),
    "epsilon": (_normalizations, 1, 2, True),
    "class": (_normalizations, 0, 1, False),
}


@pytest.mark.follows("testAll")
@pytest.mark.parametrize("case", LAYER_TYPE_CASES)
def test_get_assignment_layer_type(strategy, case):
    create_model, first, second, alike = LAYER_TYPE_CASES[case]
    with strategy.scope():
        assignments = create_model().get_pipeline_stage_assignment()
        first_type = keras_utils.get_assignment_layer_type(assignments[first], 16)
        second_type = keras_utils.get_assignment_layer_type(assignments[second], 16)
    assert (first_type == second_type) is alike
