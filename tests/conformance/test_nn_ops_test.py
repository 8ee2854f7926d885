"""Conformance: graphcore/tensorflow `tensorflow/python/ipu/tests/nn_ops_test.py`.

`ipu.ops.nn_ops` in TF1 programs compiled for the IPU: the sampled-logits helper, sampled
softmax and NCE losses against numpy; gelu, hard sigmoid and swish (values and gradients)
against numpy formulas; the CTC losses and their gradients against
`tf.nn.ctc_loss_v2` on the CPU, their output dtypes and the refused one; the CTC beam search
decoders against `tf.nn.ctc_beam_search_decoder`; gelu (exact and approximate) on a plain
`/device:IPU:0`.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu
from tensorflow.python.ipu.ops import nn_ops
from tensorflow.python.ipu.ops.nn_ops import _compute_sampled_logits

v1 = tf.compat.v1

_EPS = 1e-3


@pytest.fixture
def configured(tf1_graph):
    config = ipu.config.IPUConfig()
    config.ipu_model.compile_ipu_code = False
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    yield tf1_graph
    ipu.config.reset_ipu_configuration()


def _test_data(rng, num_classes, dim, batch_size, num_true, labels, sampled, subtract_log_q):
    """Inputs of a sampled-logits case and the logits and labels expected (numpy)."""
    weights = rng.standard_normal((num_classes, dim)).astype(np.float32)
    biases = rng.standard_normal(num_classes).astype(np.float32)
    hidden_acts = rng.standard_normal((batch_size, dim)).astype(np.float32)
    true_exp = np.full([batch_size, 1], 0.5, np.float32)
    sampled_exp = np.full([len(sampled)], 0.5, np.float32)
    sampled_vals = (sampled, true_exp, sampled_exp)

    true_w, true_b = weights[labels], biases[labels]
    true_logits = np.sum(
        hidden_acts.reshape((batch_size, 1, dim)) * true_w.reshape((batch_size, num_true, dim)),
        axis=2,
    ) + true_b.reshape((batch_size, num_true))
    sampled_logits = hidden_acts @ weights[sampled].T + biases[sampled]
    if subtract_log_q:
        true_logits -= np.log(true_exp)
        sampled_logits -= np.log(sampled_exp[np.newaxis, :])
    exp_logits = np.concatenate([true_logits, sampled_logits], axis=1)
    exp_labels = np.hstack((np.ones_like(true_logits) / num_true, np.zeros_like(sampled_logits)))
    return weights, biases, hidden_acts, sampled_vals, exp_logits, exp_labels


def _sampled_logits_cases(rng):
    num_classes, batch_size = 5, 3
    for num_true in range(1, 5):
        labels = rng.integers(0, num_classes, size=batch_size * num_true)
        data = _test_data(rng, num_classes, 10, batch_size, num_true, labels, [1, 0, 2, 3], False)
        weights, biases, hidden_acts, sampled_vals, exp_logits, exp_labels = data

        def model(weights=weights, biases=biases, labels=labels, hidden_acts=hidden_acts,
                  num_true=num_true, sampled_vals=sampled_vals):  # fmt: skip
            return _compute_sampled_logits(
                weights=tf.constant(weights),
                biases=tf.constant(biases),
                labels=tf.constant(labels, dtype=tf.int64, shape=(batch_size, num_true)),
                inputs=tf.constant(hidden_acts),
                num_sampled=4,
                num_classes=num_classes,
                num_true=num_true,
                sampled_values=sampled_vals,
                subtract_log_q=False,
                name=f"sampled_logits_basic_num_true_{num_true}",
            )

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            compiled = ipu.ipu_compiler.compile(model)
        with v1.Session() as sess:
            got_logits, got_labels = sess.run(compiled)
        yield exp_logits, exp_labels, got_logits, got_labels


@pytest.mark.follows("testShapes")
def test_shapes(configured):
    for exp_logits, exp_labels, got_logits, got_labels in _sampled_logits_cases(
        np.random.default_rng(42)
    ):
        assert got_logits.shape == exp_logits.shape
        assert got_labels.shape == exp_labels.shape


@pytest.mark.follows("testBasic")
def test_basic(configured):
    for exp_logits, exp_labels, got_logits, got_labels in _sampled_logits_cases(
        np.random.default_rng(42)
    ):
        np.testing.assert_allclose(got_logits, exp_logits, rtol=_EPS, atol=_EPS)
        np.testing.assert_allclose(got_labels, exp_labels, rtol=_EPS, atol=_EPS)


def _loss_case(loss_fn):
    """The original's sampled-loss case: labels [0, 1, 2] and samples [1, 0, 2, 3] (which
    hit the labels: the IPU version keeps such hits)."""
    rng = np.random.default_rng(42)
    weights, biases, hidden_acts, sampled_vals, exp_logits, exp_labels = _test_data(
        rng, 5, 10, 3, 1, [0, 1, 2], [1, 0, 2, 3], True
    )

    def model():
        return loss_fn(
            weights=tf.constant(weights),
            biases=tf.constant(biases),
            labels=tf.constant([0, 1, 2], shape=(3, 1)),
            inputs=tf.constant(hidden_acts),
            num_sampled=4,
            num_classes=5,
            num_true=1,
            sampled_values=sampled_vals,
        )

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(model)
    with v1.Session() as sess:
        return sess.run(compiled)[0], exp_logits, exp_labels


@pytest.mark.follows("testSampledSoftmaxLoss")
def test_sampled_softmax_loss(configured):
    got, logits, targets = _loss_case(nn_ops.sampled_softmax_loss)
    exp = np.exp(logits - np.amax(logits, axis=1, keepdims=True))
    pred = exp / np.sum(exp, 1, keepdims=True)
    expected = -np.sum(targets * np.log(pred + 1.0e-20), axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.follows("testNCELoss")
def test_nce_loss(configured):
    got, logits, targets = _loss_case(nn_ops.nce_loss)
    pred = np.clip(1.0 / (1.0 + np.exp(-logits)), 0.0001, 1 - 0.0001)
    expected = np.sum(-targets * np.log(pred) - (1.0 - targets) * np.log(1.0 - pred), 1)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def _gelu_approx(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * np.power(x, 3))))


def _gelu_approx_derivative(x):
    sech = 2.0 / (
        np.exp(0.0356774 * x**3 + 0.797885 * x) + np.exp(-(0.0356774 * x**3 + 0.797885 * x))
    )
    return (
        0.5 * np.tanh(0.0356774 * x**3 + 0.797885 * x)
        + (0.0535161 * x**3 + 0.398942 * x) * sech**2
        + 0.5
    )


def _swish_derivative(x):
    s = 1 / (1 + np.exp(-x))
    return s * (1 + x * (1 - s))


_NON_LINEARITIES = {
    # name: (op, activation, derivative), the original's numpy formulas.
    "HardSigmoid": (nn_ops.hard_sigmoid, lambda x: 0.2 * x + 0.5, lambda x: 0.2 * (abs(x) <= 2.5)),
    "Gelu": (nn_ops.gelu, _gelu_approx, _gelu_approx_derivative),
    "Swish": (nn_ops.swish, lambda x: x / (1 + np.exp(-x)), _swish_derivative),
}


@pytest.mark.follows("testActivation")
@pytest.mark.parametrize("name", list(_NON_LINEARITIES))
@pytest.mark.parametrize(("dtype", "rtol"), [(np.float16, 1e-2), (np.float32, 1e-6)])
def test_activation(configured, name, dtype, rtol):
    op, activation, _ = _NON_LINEARITIES[name]
    with tf.device("cpu"):
        input_data = v1.placeholder(dtype, shape=[10, 20])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(lambda x: [op(x)], inputs=[input_data])
    in_data = np.random.default_rng(0).random((10, 20))
    with v1.Session() as sess:
        result = sess.run(compiled, {input_data: in_data})
    np.testing.assert_allclose(result[0], activation(in_data.astype(dtype)), rtol=rtol, atol=rtol)


@pytest.mark.follows("testGradient")
@pytest.mark.parametrize("name", list(_NON_LINEARITIES))
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_gradient(configured, name, dtype):
    op, _, derivative = _NON_LINEARITIES[name]
    a_size, b_size, ab_size = 5, 6, 10

    def ipu_back(a, b):
        w = tf.matmul(a, b)
        output = op(w)
        gradients = v1.train.GradientDescentOptimizer(0.1).compute_gradients(output, w)
        return [output, gradients, w]

    with tf.device("cpu"):
        a = v1.placeholder(dtype, shape=[a_size, ab_size])
        b = v1.placeholder(dtype, shape=[ab_size, b_size])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(ipu_back, inputs=[a, b])
    with v1.Session() as sess:
        for mat_value in [-5.0, -1.2, -1.0, -0.5, -0.2, -0.15, -0.1, 0.0, 0.1, 0.15, 0.2, 0.5,
                          1.0, 1.2, 5.0]:  # fmt: skip
            res = sess.run(
                compiled,
                {
                    a: np.full((a_size, ab_size), mat_value),
                    b: np.full((ab_size, b_size), mat_value),
                },
            )
            (grads, values), w = res[1][0], res[2]
            np.testing.assert_allclose(values, w, rtol=1e-2)
            assert grads.shape == (a_size, b_size)
            np.testing.assert_allclose(
                grads[0][0], derivative(mat_value * mat_value * ab_size), rtol=1e-2, atol=1e-3
            )


# CTC: labels need 2n+1 time steps (blanks around repeated labels).


def _ctc_values(rng, batch_size, max_time, num_classes, max_label_length, label_length):
    labels = rng.integers(1, num_classes, size=[batch_size, max_label_length])
    logits = rng.integers(0, num_classes, size=[max_time, batch_size, num_classes])
    return labels, logits, [label_length] * batch_size, [max_time] * batch_size


def _ctc_inputs(batch_size, max_time, num_classes, max_label_length, dtype):
    return [
        v1.placeholder(np.int32, shape=[batch_size, max_label_length]),
        v1.placeholder(dtype, shape=[max_time, batch_size, num_classes]),
        v1.placeholder(np.int32, shape=[batch_size]),
        v1.placeholder(np.int32, shape=[batch_size]),
    ]


def _loss_and_grad(loss_function, inputs, **kwargs):
    loss = loss_function(*inputs, **kwargs)
    return loss, tf.gradients(loss, inputs[1])


def _as_log_probs(inputs):
    return [inputs[0], tf.nn.log_softmax(inputs[1], axis=2), *inputs[2:]]


def _compare_ctc_with_cpu(ipu_loss, log_probs, batch_size, label_length, num_classes, part):
    max_label_length = 2 * label_length + 1
    max_time = max_label_length
    values = _ctc_values(
        np.random.default_rng(1), batch_size, max_time, num_classes, max_label_length, label_length
    )
    with tf.device("cpu"):
        inputs_cpu = _ctc_inputs(batch_size, max_time, num_classes, max_label_length, np.float32)
        cpu = _loss_and_grad(tf.nn.ctc_loss, inputs_cpu, blank_index=0)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        inputs_ipu = _ctc_inputs(batch_size, max_time, num_classes, max_label_length, np.float32)
        fed = list(inputs_ipu)
        if log_probs:
            inputs_ipu = _as_log_probs(inputs_ipu)
        ipu_result = _loss_and_grad(ipu_loss, inputs_ipu, blank_index=0)
    with v1.Session() as sess:
        expected = sess.run(cpu[part], dict(zip(inputs_cpu, values, strict=True)))
        got = sess.run(ipu_result[part], dict(zip(fed, values, strict=True)))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.follows("testCTCLossWithLogProbs")
def test_ctc_loss_with_log_probs(configured):
    _compare_ctc_with_cpu(nn_ops.ctc_loss_with_log_probs, True, 8, 4, 8, part=0)


@pytest.mark.follows("testCTCGradientWithLogProbs")
def test_ctc_gradient_with_log_probs(configured):
    _compare_ctc_with_cpu(nn_ops.ctc_loss_with_log_probs, True, 2, 2, 4, part=1)


@pytest.mark.follows("testCTCLossWithLogits")
def test_ctc_loss_with_logits(configured):
    _compare_ctc_with_cpu(nn_ops.ctc_loss_v2, False, 8, 4, 8, part=0)


@pytest.mark.follows("testCTCGradientWithLogits")
def test_ctc_gradient_with_logits(configured):
    _compare_ctc_with_cpu(nn_ops.ctc_loss_v2, False, 2, 2, 4, part=1)


def _ctc_loss_dtypes(loss_fn, log_probs, in_dtypes, **kwargs):
    batch_size, label_length, num_classes = 8, 4, 8
    max_label_length = 2 * label_length + 1
    values = _ctc_values(
        np.random.default_rng(2), batch_size, max_label_length, num_classes, max_label_length,
        label_length,
    )  # fmt: skip
    results = []
    with v1.Session() as sess:
        for in_dtype in in_dtypes:
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                inputs = _ctc_inputs(batch_size, max_label_length, num_classes, max_label_length,
                                     in_dtype)  # fmt: skip
                fed = list(inputs)
                if log_probs:
                    inputs = _as_log_probs(inputs)
                loss, _ = _loss_and_grad(loss_fn, inputs, blank_index=0, **kwargs)
            results.append(sess.run(loss, dict(zip(fed, values, strict=True))).dtype)
    return results


@pytest.mark.follows("testCTCLossWithLogProbsOutDtype")
def test_ctc_loss_with_log_probs_out_dtype(configured):
    assert _ctc_loss_dtypes(
        nn_ops.ctc_loss_with_log_probs, True, [np.float16], out_dtype=np.float32
    ) == [np.float32]


@pytest.mark.follows("testCTCLossWithLogitsOutDtype")
def test_ctc_loss_with_logits_out_dtype(configured):
    assert _ctc_loss_dtypes(nn_ops.ctc_loss_v2, False, [np.float16], out_dtype=np.float32) == [
        np.float32
    ]


@pytest.mark.follows("testCTCLossWithLogProbsDefaultOutDtype")
def test_ctc_loss_with_log_probs_default_out_dtype(configured):
    assert _ctc_loss_dtypes(nn_ops.ctc_loss_with_log_probs, True, [np.float16, np.float32]) == [
        np.float16,
        np.float32,
    ]


@pytest.mark.follows("testCTCLossWithLogitsDefaultOutDtype")
def test_ctc_loss_with_logits_default_out_dtype(configured):
    assert _ctc_loss_dtypes(nn_ops.ctc_loss_v2, False, [np.float16, np.float32]) == [
        np.float16,
        np.float32,
    ]


@pytest.mark.follows("testCTCLossWithLogProbsInvalidOutDtype")
def test_ctc_loss_with_log_probs_invalid_out_dtype(configured):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        inputs = _as_log_probs(_ctc_inputs(8, 9, 8, 9, np.float32))
        with pytest.raises(
            ValueError, match="out_dtype cannot be float16 when dtype of data is float32"
        ):
            _loss_and_grad(
                nn_ops.ctc_loss_with_log_probs, inputs, blank_index=0, out_dtype=np.float16
            )


@pytest.mark.follows("testCTCLossWithLogitsInvalidOutDtype")
def test_ctc_loss_with_logits_invalid_out_dtype(configured):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        inputs = _ctc_inputs(8, 9, 8, 9, np.float32)
        with pytest.raises(
            ValueError, match="out_dtype cannot be float16 when dtype of logits is float32"
        ):
            _loss_and_grad(nn_ops.ctc_loss_v2, inputs, blank_index=0, out_dtype=np.float16)


@pytest.mark.follows("testCTCBeamSearch")
@pytest.mark.parametrize(
    ("batch_size", "max_time", "num_classes", "beam_width", "top_paths", "length", "seed"),
    [(2, 10, 32, 16, 1, 3, 0), (2, 10, 32, 16, 1, 5, 1), (2, 10, 32, 16, 3, 5, 2)],
)
def test_ctc_beam_search(
    configured, batch_size, max_time, num_classes, beam_width, top_paths, length, seed
):
    blank_index = num_classes - 1  # TensorFlow's decoder always uses the last class.
    input_data = np.random.default_rng(seed).random((max_time, batch_size, num_classes))
    lengths_data = np.full([batch_size], length, dtype=np.int32)
    inputs = v1.placeholder(np.float32, shape=[max_time, batch_size, num_classes])
    lengths = v1.placeholder(np.int32, shape=[batch_size])
    feed = {inputs: input_data, lengths: lengths_data}
    decode = dict(
        blank_index=blank_index, top_paths=top_paths, beam_width=beam_width, name="BeamSearch"
    )
    with v1.Session() as sess:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            from_logits = nn_ops.ctc_beam_search_decoder(inputs, lengths, **decode)
            from_log_probs = nn_ops.ctc_beam_search_decoder_with_log_probs(
                tf.nn.log_softmax(inputs, axis=2), lengths, **decode
            )
        probs, path_lengths, decoded, probs2, path_lengths2, decoded2 = sess.run(
            [*from_logits, *from_log_probs], feed
        )
        sparse_paths, expected_probs = tf.nn.ctc_beam_search_decoder(
            inputs, lengths, beam_width=beam_width, top_paths=top_paths
        )
        dense = []
        for path in sparse_paths:
            path = tf.sparse.to_dense(path, default_value=blank_index)
            path = tf.pad(path, [[0, 0], [0, max_time - tf.shape(path)[1]]],
                          constant_values=blank_index)  # fmt: skip
            dense.append(tf.reshape(path, [batch_size, 1, max_time]))
        expected_decoded, expected_probs = sess.run([tf.concat(dense, 1), expected_probs], feed)

    np.testing.assert_allclose(probs, probs2, rtol=1e-5)
    np.testing.assert_array_equal(path_lengths, path_lengths2)
    np.testing.assert_array_equal(decoded, decoded2)
    # Past its length, a decoded path holds undefined values.
    for b in range(batch_size):
        for p in range(top_paths):
            decoded2[b][p][path_lengths2[b][p] :] = blank_index
    np.testing.assert_allclose(probs2, expected_probs, rtol=1e-5)
    np.testing.assert_array_equal(decoded2, expected_decoded)


def _gelu_reference(x, approximate):
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * np.power(x, 3))))
    from scipy import special

    return 0.5 * x * (1.0 + special.erf(x / np.sqrt(2.0)))


def _run_gelu(approximate):
    values = np.linspace(-10, 10, 100, dtype="float32")
    with v1.Session() as sess:
        with tf.device("/device:IPU:0"):
            i = v1.placeholder(np.float32, shape=[100])
            result = sess.run(nn_ops.gelu(i, approximate), {i: values})
    np.testing.assert_allclose(result, _gelu_reference(values, approximate), rtol=1e-6, atol=1e-6)


@pytest.mark.follows("testApproximateFalse")
def test_approximate_false(configured):
    _run_gelu(False)


@pytest.mark.follows("testApproximateTrue")
def test_approximate_true(configured):
    _run_gelu(True)
