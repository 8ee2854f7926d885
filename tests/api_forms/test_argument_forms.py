"""Argument forms that programs written for the original pass: TF1 `Dimension`s and numpy
ints where an int is expected, counts given as tensors, and the original layers' keyword
arguments (`inputs_are_sorted`, `options`, `trainable=None`)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python import ipu

import ipu_tensorflow_addons.keras.layers as addons_layers

Dimension = tf.compat.v1.Dimension


@pytest.fixture
def strategy(ipu_system):
    return ipu.ipu_strategy.IPUStrategy()


@pytest.mark.parametrize(
    "count", [tf.constant(5), Dimension(5), np.int64(5)], ids=["tensor", "Dimension", "numpy"]
)
def test_repeat_takes_a_count_in_other_forms(strategy, count):
    @tf.function(experimental_compile=True)
    def program():
        return ipu.loops.repeat(count, lambda total, x: (total + x, x * 2.0), [0.0, 1.0])

    total, last = strategy.run(program)
    assert (total.numpy(), last.numpy()) == (sum(2.0**i for i in range(5)), 2.0**5)


def test_repeat_takes_a_count_known_only_when_the_program_runs(strategy):
    # loops.py: `repeat` is a while_loop with `maximum_iterations=n`, which may be a tensor.
    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def program(n):
        return ipu.loops.repeat(n, lambda x: x + 3, [tf.constant(0)])

    for n in (4, 7):
        assert int(strategy.run(program, args=(tf.constant(n),))) == 3 * n


def _regression_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    return x, x @ rng.normal(size=(4, 1)).astype(np.float32)


def _dense_model():
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
    return model


@pytest.mark.parametrize("form", ["cardinality", "Dimension"])
def test_steps_per_execution_as_the_datasets_cardinality(strategy, form):
    x, y = _regression_data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True)
    steps = dataset.cardinality() if form == "cardinality" else Dimension(8)
    reference = _dense_model()
    reference.compile(keras.optimizers.SGD(0.05), "mse")
    expected = reference.fit(dataset, epochs=2, verbose=0).history["loss"]
    with strategy.scope():
        model = _dense_model()
        model.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=steps)
        history = model.fit(dataset, epochs=2, verbose=0).history["loss"]
    assert int(model._steps_per_execution.numpy()) == 8
    np.testing.assert_allclose(history, expected, rtol=1e-5)
    for ours, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_embedding_with_dimensions_and_inputs_are_sorted(strategy):
    ids = tf.constant([[0, 2, 2, 5], [1, 3, 4, 9]])
    with strategy.scope():
        layer = ipu.keras.layers.Embedding(Dimension(10), Dimension(3))
        looked_up = strategy.run(
            tf.function(lambda: layer(ids, inputs_are_sorted=True), experimental_compile=True)
        )
    assert layer.embeddings.shape == (10, 3)
    np.testing.assert_array_equal(looked_up, tf.nn.embedding_lookup(layer.embeddings, ids).numpy())


def test_group_normalization_groups_as_a_dimension():
    x = np.random.default_rng(2).normal(size=(3, 8)).astype(np.float32)
    ours = ipu.keras.layers.GroupNormalization(groups=Dimension(2))(x)
    plain = ipu.keras.layers.GroupNormalization(groups=2)(x)
    np.testing.assert_allclose(ours, plain)
    np.testing.assert_allclose(
        ipu.normalization_ops.group_norm(x, groups=Dimension(4)),
        ipu.normalization_ops.group_norm(x, groups=4),
    )


@pytest.mark.parametrize("layer_class", [addons_layers.PopnnLSTM, addons_layers.PopnnGRU])
def test_popnn_layers_take_poplibs_options(layer_class):
    # rnn_test.py `test_options`: the options steer PopLibs, not the numbers.
    x = np.random.default_rng(3).normal(size=(2, 5, 3)).astype(np.float32)
    plain = layer_class(Dimension(4))
    tuned = layer_class(
        4,
        options={"availableMemoryProportion": 0.42},
        options_bwd={"partialsType": "half"},
    )
    expected = plain(x)
    tuned.build(x.shape)
    tuned.set_weights(plain.get_weights())
    np.testing.assert_allclose(tuned(x), expected, rtol=1e-6)
    assert tuned.get_config()["options"] == {"availableMemoryProportion": 0.42}
    rebuilt = layer_class.from_config(tuned.get_config())
    assert rebuilt.options_bwd == {"partialsType": "half"}


@pytest.mark.parametrize("argument", ["options", "options_bwd"])
def test_popnn_options_poplibs_refuses_fail_when_the_graph_is_built(argument):
    layer = addons_layers.PopnnLSTM(4, **{argument: {"availableMemoryProportion": -273.15}})
    with pytest.raises(tf.errors.InternalError, match=r"\[Poplar\]\[Build graph\] invalid_option"):
        layer(np.zeros((2, 5, 3), np.float32))


def test_ctc_layers_take_trainable_none():
    rng = np.random.default_rng(5)
    data = tf.nn.log_softmax(rng.normal(size=(6, 2, 4)).astype(np.float32))
    labels = tf.constant([[1, 2], [3, 1]])
    label_length = tf.constant([2, 1])
    data_length = tf.constant([6, 5])
    loss = addons_layers.CTCLoss(trainable=None)(labels, data, label_length, data_length)
    expected = tf.nn.ctc_loss(labels, data, label_length, data_length, blank_index=0)
    np.testing.assert_allclose(loss, tf.reduce_mean(expected), rtol=1e-5)
    inference = addons_layers.CTCInferenceLayer(trainable=None, beam_width=Dimension(3))
    predictions = addons_layers.CTCPredictionsLayer(trainable=None)
    assert inference.beam_width == 3
    assert not inference.trainable_weights and not predictions.trainable_weights
