"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/ctc_test.py`.

`CTCLoss` (on log-probabilities or logits) in a Keras model on the IPU gives the loss
of `tf.nn.ctc_loss` in a CPU model, evaluated and after a training step (with the same
weights); `CTCPredictionsLayer` gives the most probable path of TensorFlow's CPU beam
search decoder, padded with the blank; the three layers round-trip their configs.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from ipu_tensorflow_addons.keras.layers import CTCInferenceLayer, CTCLoss, CTCPredictionsLayer

PARAMS = dict(batch_size=4, label_length=2, max_label_length=5, max_time=5, num_classes=4)
BLANK = 0


@pytest.fixture
def strategy(strategy_on):
    return strategy_on(1)


def _dataset():
    rng = np.random.RandomState(9)
    batch, classes = PARAMS["batch_size"], PARAMS["num_classes"]
    labels = (rng.randint(1, classes, size=[batch, PARAMS["max_label_length"]]) + BLANK) % classes
    logits = rng.randint(0, classes, size=[batch, PARAMS["max_time"], classes]).astype(np.float32)
    label_length = np.full([batch], PARAMS["label_length"], np.int32)
    logit_length = np.full([batch], PARAMS["max_time"], np.int32)
    inputs = (labels.astype(np.int32), logits, label_length, logit_length)
    return tf.data.Dataset.from_tensors((inputs, labels.astype(np.int32)))


def _inputs():
    batch = PARAMS["batch_size"]
    return (
        keras.Input((PARAMS["max_label_length"],), batch_size=batch, dtype=tf.int32),
        keras.Input((PARAMS["max_time"], PARAMS["num_classes"]), batch_size=batch),
        keras.Input((), batch_size=batch, dtype=tf.int32),
        keras.Input((), batch_size=batch, dtype=tf.int32),
    )


def _time_major_scores(logits, log_softmax):
    dense = keras.layers.Dense(
        PARAMS["num_classes"], kernel_initializer="ones", bias_initializer="ones"
    )
    x = keras.layers.Lambda(lambda t: tf.transpose(t, [1, 0, 2]))(dense(logits))
    if log_softmax:
        x = keras.layers.Lambda(lambda t: tf.nn.log_softmax(t, axis=2))(x)
    return x


class _CpuCtcEndpoint(keras.layers.Layer):
    """The reference: TensorFlow's CTC loss on logits, added as the model's loss."""

    def call(self, logits, logit_length, labels, label_length):
        loss = tf.nn.ctc_loss(labels, logits, label_length, logit_length, blank_index=BLANK)
        self.add_loss(tf.reduce_mean(loss))
        return logits


def _cpu_model():
    labels, logits, label_length, logit_length = _inputs()
    x = _time_major_scores(logits, log_softmax=False)
    x = _CpuCtcEndpoint()(x, logit_length, labels, label_length)
    model = keras.Model([labels, logits, label_length, logit_length], x)
    model.compile("sgd")
    return model


def _ipu_model(from_logits):
    labels, logits, label_length, logit_length = _inputs()
    x = _time_major_scores(logits, log_softmax=not from_logits)
    loss = CTCLoss(blank_index=BLANK, from_logits=from_logits)(
        labels, x, label_length, logit_length
    )
    model = keras.Model([labels, logits, label_length, logit_length], loss)
    model.compile("sgd", loss=lambda _, y_pred: y_pred)
    return model


def _evaluate(strategy, from_logits):
    expected = _cpu_model().evaluate(_dataset(), steps=1, verbose=0)
    with strategy.scope():
        got = _ipu_model(from_logits).evaluate(_dataset(), steps=1, verbose=0)
    assert np.size(got) == 1
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def _fit(strategy, from_logits):
    cpu = _cpu_model()
    expected = cpu.fit(_dataset(), steps_per_epoch=1, verbose=0).history["loss"]
    with strategy.scope():
        ipu = _ipu_model(from_logits)
        got = ipu.fit(_dataset(), steps_per_epoch=1, verbose=0).history["loss"]
    assert np.size(got) == 1
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    for ours, theirs in zip(ipu.get_weights(), cpu.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.follows("testCTCLossEvaluate")
def test_ctc_loss_evaluate(strategy):
    _evaluate(strategy, from_logits=False)


@pytest.mark.follows("testCTCLossFromLogitsEvaluate")
def test_ctc_loss_from_logits_evaluate(strategy):
    _evaluate(strategy, from_logits=True)


@pytest.mark.follows("testCTCLossFit")
def test_ctc_loss_fit(strategy):
    _fit(strategy, from_logits=False)


@pytest.mark.follows("testCTCLossFromLogitsFit")
def test_ctc_loss_from_logits_fit(strategy):
    _fit(strategy, from_logits=True)


def _cpu_predictions(scores, lengths, beam_width, top_paths, blank):
    """TensorFlow's beam search (its blank is the last class): the most probable path."""
    decoded, _ = tf.nn.ctc_beam_search_decoder(
        scores, lengths, beam_width=beam_width, top_paths=top_paths
    )
    best = tf.sparse.to_dense(decoded[0], default_value=blank).numpy()
    max_time = scores.shape[0]
    return np.pad(best, [[0, 0], [0, max_time - best.shape[1]]], constant_values=blank)


@pytest.mark.follows("testCTCPredictions")
@pytest.mark.parametrize("beam_width,top_paths,seed", [(2, 1, 9), (4, 3, 10)])
def test_ctc_predictions(strategy, beam_width, top_paths, seed):
    batch, max_time, classes = PARAMS["batch_size"], PARAMS["max_time"], PARAMS["num_classes"]
    blank = classes - 1
    rng = np.random.RandomState(seed)
    inputs = rng.rand(batch * 5, max_time, classes).astype(np.float32)
    lengths = np.full([batch * 5], max_time - 1, np.int32)

    # The model's Dense layer (identity kernel, unit bias, relu) adds one to inputs in [0, 1).
    scores = np.transpose(inputs + 1.0, [1, 0, 2])
    expected = _cpu_predictions(scores, lengths, beam_width, top_paths, blank)
    with strategy.scope():
        data = keras.Input((max_time, classes), batch_size=batch)
        data_length = keras.Input((), batch_size=batch, dtype=tf.int32)
        dense = keras.layers.Dense(
            classes, activation="relu", kernel_initializer="identity", bias_initializer="ones"
        )
        x = keras.layers.Lambda(lambda t: tf.transpose(t, [1, 0, 2]))(dense(data))
        predictions = CTCPredictionsLayer(
            blank_index=blank, from_logits=True, beam_width=beam_width, top_paths=top_paths
        )(x, data_length)
        model = keras.Model([data, data_length], predictions)
        got = model.predict([inputs, lengths], batch_size=batch, verbose=0)
    np.testing.assert_array_equal(got, expected)


def _round_trips(layer):
    config = layer.get_config()
    assert type(layer).from_config(config).get_config() == config
    return config


@pytest.mark.follows("testCTCInferenceLayerGetConfig")
def test_ctc_inference_layer_get_config():
    config = _round_trips(
        CTCInferenceLayer(blank_index=0, from_logits=True, beam_width=10, top_paths=1)
    )
    assert (config["beam_width"], config["from_logits"]) == (10, True)


@pytest.mark.follows("testCTCPredictionsLayerGetConfig")
def test_ctc_predictions_layer_get_config():
    config = _round_trips(CTCPredictionsLayer(blank_index=0, beam_width=10, top_paths=1))
    assert config["beam_width"] == 10


@pytest.mark.follows("testCTCLossGetConfig")
def test_ctc_loss_get_config():
    assert _round_trips(CTCLoss(blank_index=2))["blank_index"] == 2
