"""Popnn neural-network operators (`ipu.nn_ops`): activations, CTC, sampled losses.

CTC data is time-major (`[max_time, batch_size, num_classes]`), as in Popnn.
The CTC loss is the forward (alpha) recursion in log space, differentiated by
TensorFlow; the beam search decoder runs TensorFlow's host decoder (it is not
an XLA operation), with the blank class moved to where that decoder wants it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from openipu._src.int_like import as_attr_int
from openipu._src.ops import embedding_ops

# Log-probability of an impossible path. Finite (not -inf) so that log-sum-exp
# over only impossible terms, and its gradient, stay finite.
_LOG_ZERO = -1e30


def gelu(x, approximate: bool = True, name=None) -> tf.Tensor:
    """GELU: the tanh approximation if `approximate`, otherwise the exact erf form."""
    with tf.name_scope(name or "gelu"):
        return tf.nn.gelu(tf.convert_to_tensor(x), approximate=approximate)


def hard_sigmoid(x, name=None) -> tf.Tensor:
    """Popnn's hard sigmoid, `max(0, min(1, 0.2 * x + 0.5))`."""
    with tf.name_scope(name or "hard_sigmoid"):
        x = tf.convert_to_tensor(x)
        return tf.clip_by_value(0.2 * x + 0.5, 0.0, 1.0)


def softmax(x, stable: bool = False, name=None) -> tf.Tensor:
    """Softmax over the last axis.

    Without `stable` the exponentials are taken as they are (like the IPU's
    fast softmax), so large inputs overflow; `stable` subtracts the maximum first.
    """
    with tf.name_scope(name or "softmax"):
        x = tf.convert_to_tensor(x)
        if stable:
            x = x - tf.stop_gradient(tf.reduce_max(x, axis=-1, keepdims=True))
        exponentials = tf.exp(x)
        return exponentials / tf.reduce_sum(exponentials, axis=-1, keepdims=True)


def swish(x, name=None) -> tf.Tensor:
    """Swish, `x * sigmoid(x)`."""
    with tf.name_scope(name or "swish"):
        x = tf.convert_to_tensor(x)
        return x * tf.sigmoid(x)


def multi_conv(func: Callable | None = None, options: dict | None = None):
    """Decorator marking the convolutions of `func` to run as one multi-convolution.

    On an IPU the independent convolutions run in parallel; the numbers are
    those of running them one after the other, which is what happens here.
    `options` (PopLibs multi-convolution flags) are checked and kept.
    """

    def decorate(inner: Callable) -> Callable:
        @functools.wraps(inner)
        def multi_conv_wrapper(*args):
            # As the original (ops/nn_ops.py), checked when the function is called; any
            # empty value means no options ("options if options else {}").
            if options and not isinstance(options, dict):
                raise TypeError(
                    f"Expected the multi_conv `options` to be a `dict`, but got {options} instead."
                )
            if tf.executing_eagerly():
                return inner(*args)
            graph = tf.compat.v1.get_default_graph()
            first_new = len(graph.get_operations())
            result = inner(*args)
            _check_independent_convolutions(graph.get_operations()[first_new:])
            return result

        # A function attribute, as the original's.
        multi_conv_wrapper.multi_conv_options = dict(options) if isinstance(options, dict) else {}  # type: ignore[attr-defined]
        return multi_conv_wrapper

    return decorate if func is None else decorate(func)


_CONVOLUTIONS = frozenset(
    {"Conv2D", "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3DBackpropInputV2"}
)


def _check_independent_convolutions(new_ops: list) -> None:
    """Refuses a multi-convolution whose convolutions feed each other, as the original's
    backend does (FailedPreconditionError; its multi_conv_test.py testDataDependencies)."""
    created = set(new_ops)
    convolutions = [op for op in new_ops if op.type in _CONVOLUTIONS]
    for conv in convolutions:
        seen, pending = set(), [t.op for t in conv.inputs]
        while pending:
            op = pending.pop()
            if op in seen or op not in created:
                continue
            seen.add(op)
            if op.type in _CONVOLUTIONS:
                raise tf.errors.FailedPreconditionError(
                    None,
                    None,
                    "A MultiConvolution operation requires all convolutions to be independent "
                    f"of each other. (multi_conv: {conv.name} uses the result of {op.name})",
                )
            pending.extend(t.op for t in op.inputs)


# --- CTC ---------------------------------------------------------------------------------------


def ctc_loss_v2(
    labels, logits, label_length, logit_length, blank_index: int, out_dtype=None, name=None
) -> tf.Tensor:
    """CTC loss (negative log-likelihood of `labels`) per batch entry, from logits."""
    with tf.name_scope(name or "ctc_loss"):
        logits = tf.convert_to_tensor(logits)
        out_dtype = _ctc_out_dtype(logits.dtype, out_dtype, "logits")
        log_probs = tf.nn.log_softmax(tf.cast(logits, _compute_dtype(logits.dtype)))
        loss = _ctc_negative_log_likelihood(
            log_probs, labels, label_length, logit_length, blank_index
        )
        return tf.cast(loss, out_dtype)


def ctc_loss_with_log_probs(
    labels, data, label_length, data_length, blank_index: int, out_dtype=None, name=None
) -> tf.Tensor:
    """CTC loss per batch entry, from log-probabilities (`log_softmax` of logits)."""
    with tf.name_scope(name or "ctc_loss"):
        data = tf.convert_to_tensor(data)
        out_dtype = _ctc_out_dtype(data.dtype, out_dtype, "data")
        # Renormalised: the same values for log probabilities, and the gradient the original
        # gives for them, that of the loss with respect to logits (exp(data) - posteriors; its
        # nn_ops_test.py testCTCGradientWithLogProbs compares it with tf.nn.ctc_loss's).
        log_probs = tf.nn.log_softmax(tf.cast(data, _compute_dtype(data.dtype)))
        loss = _ctc_negative_log_likelihood(
            log_probs, labels, label_length, data_length, blank_index
        )
        return tf.cast(loss, out_dtype)


def ctc_beam_search_decoder(
    logits,
    logits_lengths,
    beam_width: int = 100,
    top_paths: int = 1,
    blank_index: int = -1,
    name=None,
):
    """CTC beam search from logits.

    Returns `(log-probabilities [B, top_paths], label lengths
    [B, top_paths], decoded labels [B, top_paths, max_time])`; decoded label
    positions past a path's length hold the blank index.
    """
    with tf.name_scope(name or "ctc_beam_search"):
        logits = tf.convert_to_tensor(logits)
        log_probs = tf.nn.log_softmax(tf.cast(logits, _compute_dtype(logits.dtype)))
        return _beam_search(log_probs, logits_lengths, beam_width, top_paths, blank_index, logits)


def ctc_beam_search_decoder_with_log_probs(
    log_probs,
    input_lengths,
    beam_width: int = 100,
    top_paths: int = 1,
    blank_index: int = -1,
    name=None,
):
    """CTC beam search from log-probabilities; returns what `ctc_beam_search_decoder` does."""
    with tf.name_scope(name or "ctc_beam_search"):
        data = tf.convert_to_tensor(log_probs)
        log_probs = tf.cast(data, _compute_dtype(data.dtype))
        return _beam_search(log_probs, input_lengths, beam_width, top_paths, blank_index, data)


def _compute_dtype(dtype: tf.DType) -> tf.DType:
    # Half-precision data is accumulated in float32, as Popnn's partials are.
    return tf.float64 if dtype == tf.float64 else tf.float32


def _ctc_out_dtype(data_dtype: tf.DType, out_dtype, data_name: str) -> tf.DType:
    if not data_dtype.is_floating:
        raise TypeError(f"CTC: the data must be floating point, got dtype {data_dtype.name}")
    out_dtype = data_dtype if out_dtype is None else tf.as_dtype(out_dtype)
    if out_dtype == tf.float16 and data_dtype == tf.float32:
        # The original's words, which name its argument: `logits` or `data`.
        raise ValueError(
            f"out_dtype cannot be float16 when dtype of {data_name} is float32. (CTC loss)"
        )
    return out_dtype


def _checked_blank(blank_index: int, num_classes: int | None) -> int | tf.Tensor:
    # The original's CTC ops take blank_index as an int attribute: 1.0 is 1, a str a TypeError.
    blank_index = as_attr_int(blank_index, "CTC: blank_index")
    if num_classes is None:
        return blank_index
    if not -num_classes <= blank_index < num_classes:
        raise ValueError(
            f"CTC: blank_index {blank_index} is out of range for {num_classes} classes"
        )
    return blank_index % num_classes


def _check_rank(value: tf.Tensor, rank: int, what: str) -> None:
    if value.shape.rank is not None and value.shape.rank != rank:
        raise ValueError(f"CTC: {what} must have rank {rank}, got shape {value.shape}")


def _logsumexp(*terms: tf.Tensor) -> tf.Tensor:
    peak = tf.stop_gradient(functools.reduce(tf.maximum, terms))
    return peak + tf.math.log(functools.reduce(tf.add, [tf.exp(t - peak) for t in terms]))


def _shift_right(values: tf.Tensor, count: int) -> tf.Tensor:
    """Moves the last axis right by `count` places, filling with log zero."""
    return tf.pad(values, [[0, 0], [count, 0]], constant_values=_LOG_ZERO)[:, : tf.shape(values)[1]]


def _ctc_negative_log_likelihood(log_probs, labels, label_length, data_length, blank_index):
    _check_rank(log_probs, 3, "the data ([max_time, batch_size, num_classes])")
    labels = tf.cast(tf.convert_to_tensor(labels), tf.int32)
    label_length = tf.cast(tf.convert_to_tensor(label_length), tf.int32)
    data_length = tf.cast(tf.convert_to_tensor(data_length), tf.int32)
    _check_rank(labels, 2, "labels ([batch_size, max_label_length])")
    _check_rank(label_length, 1, "label_length")
    _check_rank(data_length, 1, "the data length")
    num_classes = log_probs.shape[2]
    blank = _checked_blank(blank_index, num_classes)
    if isinstance(blank, int) and blank < 0:
        blank += tf.shape(log_probs)[2]
    dtype = log_probs.dtype

    # Extended label sequence: blank, l1, blank, l2, ..., blank (2L + 1 states).
    padded_labels = tf.pad(labels, [[0, 0], [0, 1]])
    states = tf.range(2 * tf.shape(labels)[1] + 1)
    # tf.equal, not ==: in a TF1 graph == compares identity.
    is_label_state = tf.equal(states % 2, 1)
    state_labels = tf.gather(padded_labels, states // 2, axis=1)
    state_labels = tf.clip_by_value(state_labels, 0, tf.shape(log_probs)[2] - 1)
    extended = tf.where(is_label_state[None, :], state_labels, blank)
    valid_state = states[None, :] < 2 * label_length[:, None] + 1
    two_back = tf.pad(extended, [[0, 0], [2, 0]], constant_values=-1)[:, : tf.shape(extended)[1]]
    can_skip = is_label_state[None, :] & tf.not_equal(extended, two_back)

    batch_major = tf.transpose(log_probs, [1, 0, 2])
    emissions = tf.gather(batch_major, extended, axis=2, batch_dims=1)  # [B, T, S]
    emissions = tf.transpose(tf.maximum(emissions, _LOG_ZERO), [1, 0, 2])  # [T, B, S]
    log_zero = tf.constant(_LOG_ZERO, dtype)

    first = tf.where(valid_state & (states[None, :] < 2), emissions[0], log_zero)
    nothing_emitted = tf.where(tf.equal(states[None, :], 0), tf.zeros_like(first), log_zero)
    alpha = tf.where(data_length[:, None] > 0, first, nothing_emitted)

    def step(previous: tf.Tensor, inputs) -> tf.Tensor:
        emission, time = inputs
        skipped = tf.where(can_skip, _shift_right(previous, 2), log_zero)
        current = _logsumexp(previous, _shift_right(previous, 1), skipped) + emission
        current = tf.where(valid_state, current, log_zero)
        return tf.where(time < data_length[:, None], current, previous)

    times = tf.range(1, tf.shape(emissions)[0])
    alphas = tf.scan(step, (emissions[1:], times), initializer=alpha)
    final = tf.concat([alpha[None], alphas], 0)[-1]

    last_blank = 2 * label_length
    ends_blank = tf.gather(final, last_blank, axis=1, batch_dims=1)
    ends_label = tf.gather(final, tf.maximum(last_blank - 1, 0), axis=1, batch_dims=1)
    ends_label = tf.where(label_length > 0, ends_label, log_zero)
    log_likelihood = _logsumexp(ends_blank, ends_label)
    # No alignment fits (too few time steps for the labels): the likelihood is 0.
    impossible = log_likelihood < _LOG_ZERO / 2
    return tf.where(impossible, tf.constant(np.inf, dtype), -log_likelihood)


def _beam_search(log_probs, lengths, beam_width, top_paths, blank_index, data):
    # Int attributes of the original's decoder op, converted with int(): 4.0 is 4.
    beam_width = as_attr_int(beam_width, "ctc_beam_search_decoder: beam_width")
    top_paths = as_attr_int(top_paths, "ctc_beam_search_decoder: top_paths")
    for what, value in (("beam_width", beam_width), ("top_paths", top_paths)):
        if value < 1:
            raise ValueError(f"ctc_beam_search_decoder: {what} must be an int >= 1, got {value!r}")
    if top_paths > beam_width:
        raise ValueError(
            f"ctc_beam_search_decoder: top_paths ({top_paths}) must be less than or equal "
            f"to beam_width ({beam_width})"
        )
    _check_rank(log_probs, 3, "the data ([max_time, batch_size, num_classes])")
    num_classes = log_probs.shape[2]
    if num_classes is None:
        raise ValueError("ctc_beam_search_decoder: the number of classes must be known")
    blank = _checked_blank(blank_index, num_classes)
    # TensorFlow's decoder takes the last class as the blank: move ours there.
    order = [c for c in range(num_classes) if c != blank] + [blank]
    reordered = tf.gather(log_probs, order, axis=2)
    lengths = tf.cast(tf.convert_to_tensor(lengths), tf.int32)
    decoded, log_probability = tf.nn.ctc_beam_search_decoder(
        reordered, lengths, beam_width=beam_width, top_paths=top_paths
    )
    max_time = tf.shape(log_probs)[0]
    batch_size = tf.shape(log_probs)[1]
    original_class = tf.constant(order, tf.int32)
    paths, path_lengths = [], []
    for path in decoded:
        ids = tf.gather(original_class, tf.cast(path.values, tf.int32))
        dense = tf.sparse.to_dense(
            tf.SparseTensor(path.indices, ids, path.dense_shape), default_value=blank
        )
        padding = max_time - tf.shape(dense)[1]
        paths.append(tf.pad(dense, [[0, 0], [0, padding]], constant_values=blank))
        ones = tf.ones_like(path.values, tf.int32)
        path_lengths.append(tf.math.unsorted_segment_sum(ones, path.indices[:, 0], batch_size))
    # The paths' log probabilities as `tf.nn.ctc_beam_search_decoder` gives them: the
    # original's nn_ops_test.py testCTCBeamSearch compares the two (its docstring's
    # "negative log probabilities" notwithstanding).
    probabilities = tf.cast(log_probability, data.dtype)
    return probabilities, tf.stack(path_lengths, axis=1), tf.stack(paths, axis=1)


# --- Sampled losses ----------------------------------------------------------------------------


def nce_loss(
    weights,
    biases,
    labels,
    inputs,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values=None,
    name: str = "nce_loss",
) -> tf.Tensor:
    """Noise-contrastive estimation loss per example, as `tf.nn.nce_loss`, via the IPU lookup."""
    with tf.name_scope(name):
        logits, targets = _compute_sampled_logits(
            weights, biases, labels, inputs, num_sampled, num_classes, num_true, sampled_values
        )
        losses = tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits)
        return tf.reduce_sum(losses, axis=1)


def sampled_softmax_loss(
    weights,
    biases,
    labels,
    inputs,
    num_sampled: int,
    num_classes: int,
    num_true: int = 1,
    sampled_values=None,
    name: str = "sampled_softmax_loss",
    seed=None,
) -> tf.Tensor:
    """Sampled softmax loss per example, as `tf.nn.sampled_softmax_loss`, via the IPU lookup."""
    with tf.name_scope(name):
        logits, targets = _compute_sampled_logits(
            weights,
            biases,
            labels,
            inputs,
            num_sampled,
            num_classes,
            num_true,
            sampled_values,
            seed=seed,
        )
        return tf.nn.softmax_cross_entropy_with_logits(
            labels=tf.stop_gradient(targets), logits=logits
        )


def _concatenated(values) -> tf.Tensor:
    """A (possibly partitioned) table: the parts are concatenated along dimension 0."""
    if isinstance(values, (list, tuple)):
        return tf.concat([tf.convert_to_tensor(v) for v in values], axis=0)
    return tf.convert_to_tensor(values)


def _compute_sampled_logits(
    weights,
    biases,
    labels,
    inputs,
    num_sampled,
    num_classes,
    num_true=1,
    sampled_values=None,
    subtract_log_q: bool = True,
    name=None,
    seed=None,
):
    """Logits and targets for the true and the sampled classes, the original's helper of
    `nce_loss` and `sampled_softmax_loss` (its name and arguments; tests import it).

    As the original's (tensorflow/python/ipu/ops/nn_ops.py), and unlike
    `tf.nn.sampled_softmax_loss`, sampled classes that are also true classes are kept.
    """
    with tf.name_scope(name or "compute_sampled_logits"):
        return _sampled_logits_in_scope(
            weights, biases, labels, inputs, num_sampled, num_classes, num_true,
            sampled_values, subtract_log_q, seed,
        )  # fmt: skip


def _sampled_logits_in_scope(
    weights, biases, labels, inputs, num_sampled, num_classes, num_true, sampled_values,
    subtract_log_q: bool, seed,
):  # fmt: skip
    weights = _concatenated(weights)
    biases = _concatenated(biases)
    inputs = tf.convert_to_tensor(inputs)
    labels = tf.cast(tf.convert_to_tensor(labels), tf.int64)
    if sampled_values is None:
        sampled_values = tf.random.log_uniform_candidate_sampler(
            true_classes=labels,
            num_true=num_true,
            num_sampled=num_sampled,
            unique=True,
            range_max=num_classes,
            seed=seed,
        )
    sampled, true_expected_count, sampled_expected_count = (
        tf.stop_gradient(s) for s in sampled_values
    )
    sampled = tf.cast(sampled, tf.int64)
    flat_labels = tf.reshape(labels, [-1])
    all_ids = tf.concat([flat_labels, sampled], 0)
    num_true_ids = tf.shape(flat_labels)[0]

    all_weights = tf.cast(embedding_ops.embedding_lookup(weights, all_ids), inputs.dtype)
    all_biases = tf.cast(embedding_ops.embedding_lookup(biases, all_ids), inputs.dtype)
    true_weights, sampled_weights = all_weights[:num_true_ids], all_weights[num_true_ids:]
    true_biases, sampled_biases = all_biases[:num_true_ids], all_biases[num_true_ids:]

    dim = tf.shape(true_weights)[1:2]
    true_weights = tf.reshape(true_weights, tf.concat([[-1, num_true], dim], 0))
    true_logits = tf.reduce_sum(inputs[:, None, :] * true_weights, axis=2)
    true_logits += tf.reshape(true_biases, [-1, num_true])
    sampled_logits = tf.matmul(inputs, sampled_weights, transpose_b=True) + sampled_biases

    if subtract_log_q:
        true_logits -= tf.math.log(tf.cast(true_expected_count, true_logits.dtype))
        sampled_logits -= tf.math.log(tf.cast(sampled_expected_count, sampled_logits.dtype))
    logits = tf.concat([true_logits, sampled_logits], 1)
    targets = tf.concat([tf.ones_like(true_logits) / num_true, tf.zeros_like(sampled_logits)], 1)
    return logits, targets
