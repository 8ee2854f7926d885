import itertools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers.ctc_inference_layer import CTCInferenceLayer
from openipu._src.addons.keras.layers.ctc_loss import CTCLoss
from openipu._src.addons.keras.layers.ctc_predictions_layer import CTCPredictionsLayer

T, B, C = 4, 2, 3


def _collapse(alignment, blank):
    """The CTC labelling of an alignment: merge repeats, then drop blanks."""
    merged = [k for i, k in enumerate(alignment) if i == 0 or k != alignment[i - 1]]
    return tuple(k for k in merged if k != blank)


def _labelling_log_probs(log_probs, length, blank):
    """Exact log-probability of every labelling of one example, by enumerating alignments."""
    totals = {}
    for alignment in itertools.product(range(log_probs.shape[-1]), repeat=length):
        score = sum(log_probs[t, k] for t, k in enumerate(alignment))
        totals.setdefault(_collapse(alignment, blank), []).append(score)
    return {labelling: np.logaddexp.reduce(scores) for labelling, scores in totals.items()}


def _brute_force_loss(log_probs, labels, label_length, data_length, blank):
    """Differentiable batch-mean CTC loss over explicitly enumerated alignments."""
    losses = []
    for b in range(len(labels)):
        target = tuple(labels[b][: label_length[b]])
        path_scores = [
            tf.add_n([log_probs[t, b, k] for t, k in enumerate(alignment)])
            for alignment in itertools.product(range(C), repeat=data_length[b])
            if _collapse(alignment, blank) == target
        ]
        losses.append(-tf.reduce_logsumexp(tf.stack(path_scores)))
    return tf.reduce_mean(tf.stack(losses))


def _random_data(seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=(T, B, C)) * 2, tf.float32)


LABELS = [[1, 2], [2, 0]]


@pytest.mark.parametrize("blank_index", [0, 2])
@pytest.mark.parametrize("from_logits", [True, False])
def test_loss_matches_enumerated_alignments_with_gradients(blank_index, from_logits):
    logits = _random_data()
    # Labels never contain the blank: swap it for class 1.
    labels = [[k if k != blank_index else 1 for k in row] for row in LABELS]
    label_length, data_length = [2, 1], [4, 3]
    layer = CTCLoss(blank_index=blank_index, from_logits=from_logits)

    def run(data):
        with tf.GradientTape() as tape:
            tape.watch(data)
            loss = layer(
                tf.constant(labels), data, tf.constant(label_length), tf.constant(data_length)
            )
        return loss, tape.gradient(loss, data)

    with tf.GradientTape() as tape:
        tape.watch(logits)
        log_probs = tf.nn.log_softmax(logits)
        expected = _brute_force_loss(log_probs, labels, label_length, data_length, blank_index)
    expected_grad = tape.gradient(expected, logits)
    data = logits if from_logits else tf.nn.log_softmax(logits)
    for loss, grad in (run(data), tf.function(run, jit_compile=True)(data)):
        assert loss.shape == [1]
        np.testing.assert_allclose(loss.numpy(), [expected.numpy()], rtol=1e-5)
        if from_logits:
            np.testing.assert_allclose(grad.numpy(), expected_grad.numpy(), atol=1e-5)


def test_loss_with_blank_in_the_middle_matches_tf_nn_ctc_loss():
    data = tf.nn.log_softmax(tf.random.stateless_normal((5, 3, 4), seed=[1, 2]))
    labels = tf.constant([[0, 2, 3], [3, 3, 0], [2, 0, 0]])
    label_length, data_length = tf.constant([3, 2, 1]), tf.constant([5, 4, 2])
    expected = tf.reduce_mean(
        tf.nn.ctc_loss(
            labels, data, label_length, data_length, logits_time_major=True, blank_index=1
        )
    )
    got = CTCLoss(blank_index=1)(labels, data, label_length, data_length)
    np.testing.assert_allclose(got.numpy(), [expected.numpy()], rtol=1e-5)


def test_loss_keeps_half_precision_dtype():
    data = tf.nn.log_softmax(_random_data())
    args = (tf.constant(LABELS), tf.constant([2, 1]), tf.constant([4, 4]))
    full = CTCLoss(blank_index=0)(args[0], data, *args[1:])
    half = CTCLoss(blank_index=0)(args[0], tf.cast(data, tf.float16), *args[1:])
    assert half.dtype == tf.float16
    np.testing.assert_allclose(half.numpy(), full.numpy(), rtol=2e-3)


def test_loss_trains_in_a_model_with_fit():
    labels = tf_keras.Input((2,), batch_size=B, dtype=tf.int32)
    data = tf_keras.Input((T, 5), batch_size=B)
    label_length = tf_keras.Input((), batch_size=B, dtype=tf.int32)
    data_length = tf_keras.Input((), batch_size=B, dtype=tf.int32)
    x = tf_keras.layers.Dense(C)(data)
    x = tf_keras.layers.Lambda(lambda v: tf.transpose(v, (1, 0, 2)))(x)
    loss = CTCLoss(from_logits=True)(labels, x, label_length, data_length)
    model = tf_keras.Model((labels, data, label_length, data_length), loss)
    model.compile(tf_keras.optimizers.SGD(0.5), loss=lambda y_true, y_pred: y_pred)
    inputs = (
        np.array(LABELS, np.int32),
        np.random.default_rng(5).normal(size=(B, T, 5)).astype(np.float32),
        np.array([2, 1], np.int32),
        np.array([4, 4], np.int32),
    )
    dummy = np.zeros((B, 1), np.float32)
    before = model.predict(inputs, verbose=0)
    kernel, bias = model.get_weights()
    logits = np.transpose(inputs[1] @ kernel + bias, (1, 0, 2))
    expected = _brute_force_loss(tf.nn.log_softmax(logits), LABELS, [2, 1], [4, 4], 0)
    np.testing.assert_allclose(np.ravel(before)[0], expected.numpy(), rtol=1e-5)
    model.fit(inputs, dummy, batch_size=B, epochs=5, verbose=0)
    assert np.ravel(model.predict(inputs, verbose=0))[0] < np.ravel(before)[0]


def _expected_top_paths(log_probs, data_length, blank, top_paths):
    per_example = []
    for b in range(log_probs.shape[1]):
        scores = _labelling_log_probs(log_probs[:, b], data_length[b], blank)
        ranked = sorted(scores.items(), key=lambda item: -item[1])[:top_paths]
        per_example.append(ranked)
    return per_example


@pytest.mark.parametrize("blank_index", [0, 1, 2])
@pytest.mark.parametrize("top_paths", [1, 3])
def test_inference_matches_exhaustive_decoding(blank_index, top_paths):
    log_probs = tf.nn.log_softmax(_random_data(seed=blank_index))
    data_length = [4, 3]
    layer = CTCInferenceLayer(blank_index=blank_index, beam_width=40, top_paths=top_paths)
    probs, lengths, decoded = layer(log_probs, tf.constant(data_length))
    assert probs.shape == [B, top_paths] and lengths.dtype == tf.int32
    assert decoded.shape == [B, top_paths, T] and decoded.dtype == tf.int32
    expected = _expected_top_paths(log_probs.numpy(), data_length, blank_index, top_paths)
    for b in range(B):
        for p, (labelling, log_prob) in enumerate(expected[b]):
            assert lengths[b, p] == len(labelling)
            assert tuple(decoded[b, p, : len(labelling)].numpy()) == labelling
            np.testing.assert_allclose(probs[b, p].numpy(), -log_prob, rtol=1e-4)


def test_inference_from_logits_equals_inference_from_log_probs():
    logits = _random_data(seed=7)
    from_logits = CTCInferenceLayer(beam_width=8, top_paths=2, from_logits=True)(logits)
    from_log_probs = CTCInferenceLayer(beam_width=8, top_paths=2)(tf.nn.log_softmax(logits))
    for a, b in zip(from_logits, from_log_probs, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)


@pytest.mark.parametrize("blank_index", [0, 2])
def test_predictions_are_the_best_path_padded_with_blank(blank_index):
    log_probs = tf.nn.log_softmax(_random_data(seed=3))
    data_length = [4, 2]
    predictions = CTCPredictionsLayer(blank_index=blank_index, beam_width=40, top_paths=2)(
        log_probs, tf.constant(data_length)
    )
    assert predictions.shape == [B, T] and predictions.dtype == tf.int32
    expected = _expected_top_paths(log_probs.numpy(), data_length, blank_index, 1)
    for b in range(B):
        best = list(expected[b][0][0])
        assert predictions[b].numpy().tolist() == best + [blank_index] * (T - len(best))


def test_predictions_worked_example():
    # Step by step the most likely classes are 1, 1, blank, 1: the labelling "1 1".
    probs = np.full((4, 1, 3), 0.05, np.float32)
    for t, k in enumerate([1, 1, 2, 1]):
        probs[t, 0, k] = 0.9
    layer = CTCPredictionsLayer(blank_index=2, beam_width=4)
    np.testing.assert_array_equal(layer(tf.math.log(probs)).numpy(), [[1, 1, 2, 2]])


def test_predictions_in_a_keras_model_predict():
    data = tf_keras.Input((T, C), batch_size=B)
    data_length = tf_keras.Input((), batch_size=B, dtype=tf.int32)
    time_major = tf_keras.layers.Lambda(lambda v: tf.transpose(v, (1, 0, 2)))(data)
    model = tf_keras.Model(
        (data, data_length), CTCPredictionsLayer(beam_width=40)(time_major, data_length)
    )
    log_probs = tf.nn.log_softmax(_random_data(seed=4)).numpy()
    got = model.predict((np.transpose(log_probs, (1, 0, 2)), np.array([4, 3], np.int32)), verbose=0)
    expected = _expected_top_paths(log_probs, [4, 3], 0, 1)
    for b in range(B):
        best = list(expected[b][0][0])
        assert got[b].tolist() == best + [0] * (T - len(best))


def test_beam_search_reports_it_cannot_be_xla_compiled():
    layer = CTCInferenceLayer(beam_width=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="CTCBeamSearchDecoder"):
        tf.function(layer, jit_compile=True)(tf.nn.log_softmax(_random_data()))


@pytest.mark.parametrize("cls", [CTCInferenceLayer, CTCPredictionsLayer])
def test_inference_config_round_trip(cls):
    layer = cls(blank_index=2, beam_width=5, top_paths=3, from_logits=True, name="decoder")
    config = layer.get_config()
    assert {k: config[k] for k in ("blank_index", "beam_width", "top_paths", "from_logits")} == {
        "blank_index": 2,
        "beam_width": 5,
        "top_paths": 3,
        "from_logits": True,
    }
    assert cls.from_config(config).get_config() == config


def test_loss_config_round_trip():
    config = CTCLoss(blank_index=3, from_logits=True).get_config()
    assert config["blank_index"] == 3 and config["from_logits"] is True
    assert CTCLoss.from_config(config).get_config() == config


@pytest.mark.parametrize("cls", [CTCInferenceLayer, CTCPredictionsLayer])
def test_top_paths_above_beam_width_is_rejected(cls):
    with pytest.raises(ValueError, match="top_paths must be at most beam_width=2, got 3"):
        cls(beam_width=2, top_paths=3)


@pytest.mark.parametrize("argument", ["beam_width", "top_paths"])
@pytest.mark.parametrize("value", [0, -2, 0.5])
def test_beam_width_and_top_paths_must_be_positive_ints(argument, value):
    with pytest.raises(ValueError, match=f"{argument} must be a positive integer"):
        CTCInferenceLayer(**{argument: value})


def test_beam_width_and_top_paths_are_converted_with_int_as_in_the_original():
    # The original's decoder op takes them as int attributes: 8.0 is 8, 2.9 is 2.
    logits = _random_data()
    got = CTCInferenceLayer(beam_width=8.0, top_paths=2.9)(logits)
    expected = CTCInferenceLayer(beam_width=8, top_paths=2)(logits)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert got[2].shape[1] == 2
    with pytest.raises(TypeError, match="beam_width must be an int, got 'wide'"):
        CTCInferenceLayer(beam_width="wide")


@pytest.mark.parametrize("cls", [CTCLoss, CTCInferenceLayer, CTCPredictionsLayer])
def test_bad_blank_index_and_from_logits(cls):
    with pytest.raises(TypeError, match="blank_index must be an int, got 'last'"):
        cls(blank_index="last")


def test_blank_index_and_from_logits_given_as_other_numbers_work_as_in_the_original():
    # The original's op attribute takes int(blank_index); from_logits is read by truth value.
    logits = _random_data()
    args = (tf.constant([[1, 2], [2, 1]]), logits, tf.constant([2, 1]), tf.constant([4, 3]))
    expected = CTCLoss(blank_index=0, from_logits=True)(*args)
    got = CTCLoss(blank_index=0.0, from_logits=1)(*args)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)
    reference = tf.reduce_mean(
        tf.nn.ctc_loss(args[0], logits, args[2], args[3], logits_time_major=True, blank_index=0)
    )
    np.testing.assert_allclose(got.numpy(), [reference.numpy()], rtol=1e-5)


def test_blank_index_past_the_classes_is_rejected():
    data = tf.nn.log_softmax(_random_data())
    with pytest.raises(ValueError, match="blank_index 3 is out of range for 3 classes"):
        CTCInferenceLayer(blank_index=3)(data)
    with pytest.raises(ValueError, match="blank_index -4 is out of range for 3 classes"):
        CTCLoss(blank_index=-4)(tf.constant([[1], [1]]), data, [1, 1], [4, 3])


def test_negative_blank_index_counts_from_the_last_class():
    """As the original's CTC operations (whose decoders default to blank_index=-1), which the
    layers call: -1 is the last class. The layers keep the index as given."""
    log_probs = tf.nn.log_softmax(_random_data())
    labels, label_length, data_length = [[1, 0], [0, 1]], [2, 1], [4, 3]
    loss = CTCLoss(blank_index=-1)
    got = loss(tf.constant(labels), log_probs, tf.constant(label_length), tf.constant(data_length))
    expected = _brute_force_loss(log_probs, labels, label_length, data_length, C - 1)
    np.testing.assert_allclose(got.numpy(), [expected.numpy()], rtol=1e-5)
    assert loss.get_config()["blank_index"] == -1
    decoded = CTCInferenceLayer(blank_index=-3, beam_width=40, top_paths=2)(
        log_probs, tf.constant(data_length)
    )
    expected_paths = _expected_top_paths(log_probs.numpy(), data_length, 0, 2)
    for b, paths in enumerate(expected_paths):
        for p, (path, _) in enumerate(paths):
            assert decoded[1][b, p].numpy() == len(path)
            assert decoded[2][b, p].numpy().tolist() == list(path) + [0] * (T - len(path))
    with pytest.raises(ValueError, match="blank_index 5 is out of range for 3 classes"):
        CTCLoss(blank_index=5)(tf.constant(LABELS), log_probs, [2, 1], [4, 4])


def test_bad_input_types_and_shapes_are_rejected():
    data = tf.nn.log_softmax(_random_data())
    lengths = tf.constant([2, 1])
    loss = CTCLoss()
    with pytest.raises(TypeError, match="data must be floating point"):
        loss(tf.constant(LABELS), tf.zeros((T, B, C), tf.int32), lengths, lengths)
    with pytest.raises(ValueError, match="data must have shape \\[max_time"):
        loss(tf.constant(LABELS), tf.zeros((B, C)), lengths, lengths)
    with pytest.raises(TypeError, match="labels must be integers"):
        loss(tf.zeros((B, 2)), data, lengths, lengths)
    with pytest.raises(ValueError, match="labels must have shape"):
        loss(tf.constant([1, 2]), data, lengths, lengths)
    with pytest.raises(ValueError, match="label_length must have shape \\[batch_size\\]"):
        loss(tf.constant(LABELS), data, tf.zeros((B, 2), tf.int32), lengths)
    with pytest.raises(TypeError, match="data_length must be integers"):
        CTCInferenceLayer()(data, tf.constant([4.0, 4.0]))
