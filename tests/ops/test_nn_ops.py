"""nn_ops against stock TensorFlow and numpy definitions (activations, CTC, sampled losses)."""

import functools
import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from openipu._src.ops import nn_ops

RNG = np.random.default_rng(1234)


def _jit(fn):
    return tf.function(fn, jit_compile=True)


# --- activations --------------------------------------------------------------------------------


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_matches_definition(approximate):
    x = RNG.normal(size=(5, 7)).astype(np.float32) * 3
    if approximate:
        expected = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    else:
        expected = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    np.testing.assert_allclose(
        nn_ops.gelu(x, approximate=approximate), expected, rtol=1e-5, atol=1e-6
    )
    jitted = _jit(lambda v: nn_ops.gelu(v, approximate=approximate))(x)
    np.testing.assert_allclose(jitted, expected, rtol=1e-5, atol=1e-6)


def test_gelu_gradient_matches_tf():
    x = tf.constant(RNG.normal(size=(10,)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = nn_ops.gelu(x)
        reference = tf.nn.gelu(x, approximate=True)
    np.testing.assert_allclose(tape.gradient(ours, x), tape.gradient(reference, x), rtol=1e-6)


def test_hard_sigmoid_matches_definition_and_gradient():
    x = tf.constant(np.linspace(-4, 4, 32).astype(np.float32))
    expected = np.clip(0.2 * x.numpy() + 0.5, 0, 1)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = nn_ops.hard_sigmoid(x)
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    inside = np.abs(x.numpy()) < 2.5
    np.testing.assert_allclose(tape.gradient(y, x), np.where(inside, 0.2, 0.0), rtol=1e-6)
    np.testing.assert_allclose(_jit(nn_ops.hard_sigmoid)(x), expected, rtol=1e-6)


@pytest.mark.parametrize("stable", [False, True])
def test_softmax_matches_numpy(stable):
    x = RNG.normal(size=(4, 9)).astype(np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    expected = e / e.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(nn_ops.softmax(x, stable=stable), expected, rtol=1e-5)
    np.testing.assert_allclose(
        _jit(lambda v: nn_ops.softmax(v, stable=stable))(x), expected, rtol=1e-5
    )


def test_stable_softmax_survives_large_inputs_the_fast_one_does_not():
    x = np.array([[1000.0, 1001.0, 999.0]], np.float32)
    stable = nn_ops.softmax(x, stable=True).numpy()
    np.testing.assert_allclose(stable, tf.nn.softmax(x).numpy(), rtol=1e-6)
    assert not np.all(np.isfinite(nn_ops.softmax(x, stable=False).numpy()))


def test_softmax_gradient_matches_tf():
    x = tf.constant(RNG.normal(size=(3, 5)).astype(np.float32))
    weights = tf.constant(RNG.normal(size=(3, 5)).astype(np.float32))
    for stable in (False, True):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            ours = tf.reduce_sum(nn_ops.softmax(x, stable=stable) * weights)
            reference = tf.reduce_sum(tf.nn.softmax(x) * weights)
        np.testing.assert_allclose(tape.gradient(ours, x), tape.gradient(reference, x), atol=1e-6)


def test_swish_matches_definition_and_silu_gradient():
    x = tf.constant(RNG.normal(size=(20,)).astype(np.float32) * 3)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = nn_ops.swish(x)
        reference = tf.nn.silu(x)
    np.testing.assert_allclose(ours, x.numpy() / (1 + np.exp(-x.numpy())), rtol=1e-5)
    np.testing.assert_allclose(tape.gradient(ours, x), tape.gradient(reference, x), rtol=1e-5)
    np.testing.assert_allclose(_jit(nn_ops.swish)(x), ours, rtol=1e-6)


def test_multi_conv_runs_the_convolutions_unchanged():
    images = tf.constant(RNG.normal(size=(2, 6, 6, 3)).astype(np.float32))
    kernel_a = tf.constant(RNG.normal(size=(3, 3, 3, 4)).astype(np.float32))
    kernel_b = tf.constant(RNG.normal(size=(2, 2, 3, 2)).astype(np.float32))

    def convs(x, y):
        return tf.nn.conv2d(x, kernel_a, 1, "SAME"), tf.nn.conv2d(y, kernel_b, 1, "VALID")

    expected = convs(images, images)
    for decorated in (
        nn_ops.multi_conv(convs),
        nn_ops.multi_conv(options={"planType": "serial"})(convs),
    ):
        for got, want in zip(decorated(images, images), expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    jitted = _jit(nn_ops.multi_conv(convs))(images, images)
    np.testing.assert_allclose(jitted[0], expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", [None, {}, [], ""])
def test_multi_conv_takes_any_empty_options(options):
    # The original reads `options if options else {}`.
    kernel = tf.constant(RNG.normal(size=(3, 3, 3, 4)).astype(np.float32))
    images = tf.constant(RNG.normal(size=(1, 5, 5, 3)).astype(np.float32))
    decorated = nn_ops.multi_conv(options=options)(lambda x: tf.nn.conv2d(x, kernel, 1, "SAME"))
    np.testing.assert_allclose(
        decorated(images), tf.nn.conv2d(images, kernel, 1, "SAME"), rtol=1e-6
    )


def test_multi_conv_options_must_be_a_dict():
    # As the original (ops/nn_ops.py): checked when the decorated function is called.
    decorated = nn_ops.multi_conv(options=[("planType", "serial")])(tf.identity)
    with pytest.raises(
        TypeError, match=r"Expected the multi_conv `options` to be a `dict`, but got .*planType"
    ):
        decorated(tf.ones([2]))


# --- CTC loss -----------------------------------------------------------------------------------


def _collapse(path, blank):
    merged = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
    return tuple(c for c in merged if c != blank)


def _label_probabilities(log_probs, blank):
    """Probability of every labelling, summed over all alignments ([T, C] -> dict)."""
    num_steps, num_classes = log_probs.shape
    probabilities = {}
    for path in itertools.product(range(num_classes), repeat=num_steps):
        p = math.exp(sum(log_probs[t, c] for t, c in enumerate(path)))
        key = _collapse(path, blank)
        probabilities[key] = probabilities.get(key, 0.0) + p
    return probabilities


def _log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


CTC_CASES = {
    # name: (blank_index, labels, label_length, logit_length)
    "blank_first": (0, [[1, 2, 2], [3, 1, 1], [2, 2, 2]], [3, 2, 0], [8, 6, 5]),
    "blank_last": (4, [[1, 2, 2], [3, 1, 0], [1, 0, 0]], [3, 2, 1], [8, 8, 3]),
    "blank_negative": (-1, [[0, 0, 1], [3, 1, 0], [2, 0, 0]], [3, 3, 1], [7, 8, 1]),
    "blank_middle": (2, [[1, 3, 3], [3, 1, 0], [4, 4, 4]], [3, 2, 2], [8, 6, 6]),
}


def _ctc_inputs(case):
    blank, labels, label_length, logit_length = CTC_CASES[case]
    logits = tf.constant(RNG.normal(size=(8, 3, 5)).astype(np.float32))
    return blank, tf.constant(labels), tf.constant(label_length), tf.constant(logit_length), logits


@pytest.mark.parametrize("case", sorted(CTC_CASES))
def test_ctc_loss_v2_matches_tf_ctc_loss_values_and_gradients(case):
    blank, labels, label_length, logit_length, logits = _ctc_inputs(case)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours = nn_ops.ctc_loss_v2(labels, logits, label_length, logit_length, blank)
        reference = tf.nn.ctc_loss(
            labels, logits, label_length, logit_length, logits_time_major=True, blank_index=blank
        )
    np.testing.assert_allclose(ours, reference, rtol=1e-5)
    np.testing.assert_allclose(
        tape.gradient(ours, logits), tape.gradient(reference, logits), atol=1e-5
    )


@pytest.mark.parametrize("case", sorted(CTC_CASES))
def test_ctc_loss_with_log_probs_is_the_loss_of_log_softmax(case):
    blank, labels, label_length, logit_length, logits = _ctc_inputs(case)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours = nn_ops.ctc_loss_with_log_probs(
            labels, tf.nn.log_softmax(logits), label_length, logit_length, blank
        )
        reference = tf.nn.ctc_loss(
            labels, logits, label_length, logit_length, logits_time_major=True, blank_index=blank
        )
    np.testing.assert_allclose(ours, reference, rtol=1e-5)
    # Chain rule through log_softmax: the gradients with respect to the logits agree.
    np.testing.assert_allclose(
        tape.gradient(ours, logits), tape.gradient(reference, logits), atol=1e-5
    )


def test_ctc_loss_matches_brute_force_sum_over_alignments():
    logits = RNG.normal(size=(4, 1, 3)).astype(np.float32)
    log_probs = _log_softmax(logits[:, 0].astype(np.float64))
    probabilities = _label_probabilities(log_probs, blank=0)
    for label in [(1,), (1, 2), (2, 2), (1, 1, 2)]:
        padded = list(label) + [0] * (3 - len(label))
        loss = nn_ops.ctc_loss_v2([padded], logits, [len(label)], [4], blank_index=0)
        np.testing.assert_allclose(loss.numpy()[0], -math.log(probabilities[label]), rtol=1e-5)


def test_ctc_loss_of_an_impossible_labelling_is_infinite():
    logits = tf.zeros([2, 1, 3])
    loss = nn_ops.ctc_loss_v2([[1, 1, 1]], logits, [3], [2], blank_index=0)
    assert np.isinf(loss.numpy()[0])


def test_ctc_loss_jit_matches_eager():
    blank, labels, label_length, logit_length, logits = _ctc_inputs("blank_middle")

    def loss(values):
        return nn_ops.ctc_loss_v2(labels, values, label_length, logit_length, blank)

    np.testing.assert_allclose(_jit(loss)(logits), loss(logits), rtol=1e-6)

    def loss_from_log_probs(values):
        return nn_ops.ctc_loss_with_log_probs(
            labels, tf.nn.log_softmax(values), label_length, logit_length, blank
        )

    np.testing.assert_allclose(_jit(loss_from_log_probs)(logits), loss(logits), rtol=1e-5)


def test_ctc_loss_dtypes():
    blank, labels, label_length, logit_length, logits = _ctc_inputs("blank_first")
    half = tf.cast(logits, tf.float16)
    assert nn_ops.ctc_loss_v2(labels, half, label_length, logit_length, blank).dtype == tf.float16
    wide = nn_ops.ctc_loss_v2(labels, half, label_length, logit_length, blank, out_dtype=tf.float32)
    assert wide.dtype == tf.float32
    reference = tf.nn.ctc_loss(
        labels, tf.cast(half, tf.float32), label_length, logit_length, blank_index=blank
    )
    np.testing.assert_allclose(wide, reference, rtol=1e-4)


@pytest.mark.parametrize("op", [nn_ops.ctc_loss_v2, nn_ops.ctc_loss_with_log_probs])
def test_ctc_loss_rejects_float16_out_dtype_for_float32_data(op):  # E49
    blank, labels, label_length, logit_length, logits = _ctc_inputs("blank_first")
    with pytest.raises(ValueError, match="out_dtype cannot be float16.*float32"):
        op(labels, logits, label_length, logit_length, blank, out_dtype=tf.float16)


def test_ctc_loss_rejects_a_blank_index_out_of_range():
    blank, labels, label_length, logit_length, logits = _ctc_inputs("blank_first")
    with pytest.raises(ValueError, match="blank_index 5 is out of range for 5 classes"):
        nn_ops.ctc_loss_v2(labels, logits, label_length, logit_length, 5)


def test_ctc_loss_takes_blank_index_as_the_original_s_int_attribute():
    # int(2.0) == 2, as TensorFlow's op attributes convert it; a str is a TypeError.
    blank, labels, label_length, logit_length, logits = _ctc_inputs("blank_first")
    got = nn_ops.ctc_loss_v2(labels, logits, label_length, logit_length, float(blank))
    reference = tf.nn.ctc_loss(
        labels, logits, label_length, logit_length, logits_time_major=True, blank_index=blank
    )
    np.testing.assert_allclose(got, reference, rtol=1e-5)
    with pytest.raises(TypeError, match="blank_index must be an int, got 'first'"):
        nn_ops.ctc_loss_v2(labels, logits, label_length, logit_length, "first")


# --- CTC beam search ----------------------------------------------------------------------------


def _separated_logits(num_steps, batch, num_classes):
    # Spread-out values so that no two labellings tie.
    return (RNG.normal(size=(num_steps, batch, num_classes)) * 2.5).astype(np.float32)


@pytest.mark.parametrize("blank_index", [0, 1, -1])
def test_beam_search_finds_the_most_probable_labellings(blank_index):
    num_steps, batch, num_classes, top_paths = 4, 2, 3, 3
    logits = _separated_logits(num_steps, batch, num_classes)
    lengths = np.array([4, 3], np.int32)
    probs, label_lengths, decoded = nn_ops.ctc_beam_search_decoder(
        logits, lengths, beam_width=64, top_paths=top_paths, blank_index=blank_index
    )
    assert probs.shape == (batch, top_paths) and label_lengths.shape == (batch, top_paths)
    assert decoded.shape == (batch, top_paths, num_steps)
    blank = blank_index % num_classes
    for b in range(batch):
        log_probs = _log_softmax(logits[: lengths[b], b].astype(np.float64))
        ranked = sorted(_label_probabilities(log_probs, blank).items(), key=lambda kv: -kv[1])
        for k, (label, probability) in enumerate(ranked[:top_paths]):
            assert label_lengths[b, k] == len(label)
            assert tuple(decoded[b, k, : len(label)].numpy()) == label
            assert np.all(decoded[b, k, len(label) :].numpy() == blank)
            # Log probabilities, as tf.nn.ctc_beam_search_decoder's (the original's test).
            np.testing.assert_allclose(probs[b, k], math.log(probability), rtol=1e-4)


def test_beam_search_with_log_probs_equals_beam_search_on_logits():
    logits = _separated_logits(5, 3, 4)
    lengths = [5, 4, 2]
    from_logits = nn_ops.ctc_beam_search_decoder(logits, lengths, beam_width=8, top_paths=2)
    from_log_probs = nn_ops.ctc_beam_search_decoder_with_log_probs(
        tf.nn.log_softmax(logits), lengths, beam_width=8, top_paths=2
    )
    for ours, theirs in zip(from_logits, from_log_probs, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_beam_search_in_a_function_matches_eager():
    logits = _separated_logits(5, 2, 4)
    lengths = tf.constant([5, 3])
    eager = nn_ops.ctc_beam_search_decoder(
        logits, lengths, beam_width=4, top_paths=2, blank_index=0
    )
    traced = tf.function(
        lambda x: nn_ops.ctc_beam_search_decoder(
            x, lengths, beam_width=4, top_paths=2, blank_index=0
        )
    )(logits)
    for ours, theirs in zip(eager, traced, strict=True):
        np.testing.assert_allclose(ours, theirs)


@pytest.mark.parametrize(
    "op", [nn_ops.ctc_beam_search_decoder, nn_ops.ctc_beam_search_decoder_with_log_probs]
)
def test_beam_search_rejects_more_paths_than_beams(op):  # E50
    with pytest.raises(ValueError, match=r"top_paths \(5\).*beam_width \(4\)"):
        op(tf.zeros([3, 1, 4]), [3], beam_width=4, top_paths=5)


# --- sampled losses -----------------------------------------------------------------------------


def _sampled_problem(num_true):
    num_classes, dim, batch, num_sampled = 12, 6, 5, 4
    weights = tf.constant(RNG.normal(size=(num_classes, dim)).astype(np.float32))
    biases = tf.constant(RNG.normal(size=(num_classes,)).astype(np.float32))
    labels = tf.constant(RNG.integers(0, num_classes, size=(batch, num_true)), tf.int64)
    inputs = tf.constant(RNG.normal(size=(batch, dim)).astype(np.float32))
    hit = int(labels.numpy()[0, 0])
    others = [c for c in (3, 7, 11, 1) if c != hit][:3]
    sampled = tf.constant([hit, *others], tf.int64)  # unique, with an accidental hit
    sampled_values = (
        sampled,
        tf.constant(RNG.uniform(0.1, 1, size=(batch, num_true)).astype(np.float32)),
        tf.constant(RNG.uniform(0.1, 1, size=(num_sampled,)).astype(np.float32)),
    )
    return dict(
        weights=weights,
        biases=biases,
        labels=labels,
        inputs=inputs,
        num_sampled=num_sampled,
        num_classes=num_classes,
        num_true=num_true,
        sampled_values=sampled_values,
    )


@pytest.mark.parametrize("num_true", [1, 2])
@pytest.mark.parametrize(
    "ours, reference",
    [
        (nn_ops.nce_loss, tf.nn.nce_loss),
        # The original keeps accidental hits (tensorflow/python/ipu/ops/nn_ops.py).
        (
            nn_ops.sampled_softmax_loss,
            functools.partial(tf.nn.sampled_softmax_loss, remove_accidental_hits=False),
        ),
    ],
)
def test_sampled_losses_match_tf_nn(ours, reference, num_true):
    problem = _sampled_problem(num_true)
    variables = [problem["weights"], problem["biases"], problem["inputs"]]
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(variables)
        got = ours(**problem)
        expected = reference(**problem)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    for ours_grad, reference_grad in zip(
        tape.gradient(got, variables), tape.gradient(expected, variables), strict=True
    ):
        np.testing.assert_allclose(
            tf.convert_to_tensor(ours_grad), tf.convert_to_tensor(reference_grad), atol=1e-5
        )
    jitted = _jit(lambda: ours(**problem))()
    np.testing.assert_allclose(jitted, got, rtol=1e-5)


def test_sampled_losses_accept_partitioned_weights():
    problem = _sampled_problem(1)
    whole = nn_ops.nce_loss(**problem)
    problem["weights"] = tf.split(problem["weights"], [5, 7])
    np.testing.assert_allclose(nn_ops.nce_loss(**problem), whole, rtol=1e-6)


def test_sampled_softmax_loss_samples_by_itself():
    problem = _sampled_problem(1)
    del problem["sampled_values"]
    loss = nn_ops.sampled_softmax_loss(**problem, seed=3)
    assert loss.shape == (5,) and np.all(np.isfinite(loss))
