"""Conformance: graphcore/ipu_tensorflow_addons `ipu_tensorflow_addons/keras/layers/effective_transformer_test.py`.

`EffectiveTransformer` refuses inconsistent inputs (ranks, sequence counts, length
vectors, dtypes, head masks) with the original's messages; on the IPU, called in a
compiled function or in a Keras model, it returns the output and context of the
original's shapes (the context that of numpy attention, the output layer-normalized), trains
with a falling loss (custom loop and `fit`), round-trips its config, and packs padded
sequences into a dense buffer (`_unpad`).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from ipu_tensorflow_addons.keras.layers import EffectiveTransformer

FROM_LENS = np.array([[8], [3], [5], [7], [3]], np.int32)
TO_LENS = np.array([[2], [8], [11], [3], [9]], np.int32)
HEADS, HEAD_SIZE, OUTPUT_SIZE = 4, 16, 12
CASES = {
    "no_scale": dict(use_scale=False, q_mask=None),
    "scale": dict(use_scale=True, q_mask=None),
    "scale_q_mask": dict(use_scale=True, q_mask=np.ones((5, HEADS), np.bool_)),
}


@pytest.fixture
def strategy(strategy_on):
    return strategy_on(1)


def _sequences(lengths):
    sequences = np.zeros((len(lengths), lengths.max()), np.float32)
    for i, n in enumerate(lengths[:, 0]):
        sequences[i, :n] = i + 1
    return sequences


def _inputs(q_mask):
    inputs = [_sequences(FROM_LENS), FROM_LENS, _sequences(TO_LENS), TO_LENS]
    return inputs + ([q_mask] if q_mask is not None else [])


def _transformer(use_scale):
    return EffectiveTransformer(
        output_layer_size=OUTPUT_SIZE,
        max_batch_size=10,
        use_scale=use_scale,
        num_attention_heads=HEADS,
        attention_head_size=HEAD_SIZE,
        sequences_per_iter=2,
        embedding_initializer="ones",
        output_initializer="ones",
    )


def _expected_context():
    """numpy attention with the layers' ones kernels and zero biases: every query, key and
    value component of a token is the token itself (zero where padded), so the logits
    are HEAD_SIZE * q * k; padded keys (logit 0) stay in the softmax, as the original's."""
    queries = np.where(_valid(FROM_LENS), _sequences(FROM_LENS), 0.0)
    keys = np.where(_valid(TO_LENS), _sequences(TO_LENS), 0.0)
    logits = HEAD_SIZE * queries[:, :, None] * keys[:, None, :]
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    context = np.einsum("bqk,bk->bq", weights, keys)
    return np.broadcast_to(context[:, :, None, None], (*context.shape, HEADS, HEAD_SIZE))


def _valid(lengths):
    return np.arange(lengths.max())[None, :] < lengths


def _check_results(out, context):
    batch, length = _sequences(FROM_LENS).shape
    assert out.shape == (batch, OUTPUT_SIZE)
    assert context.shape == (batch, length, HEADS, HEAD_SIZE)
    np.testing.assert_allclose(context, _expected_context(), rtol=1e-5, atol=1e-5)
    # The output Dense (ones kernel, zeros bias) gives every unit the same value, which the
    # output layer normalization (on by default, unit gain, zero offset) takes to zero, up
    # to the rounding of the mean: a few float32 steps of the Dense's value divided by
    # sqrt(epsilon) (XLA's CPU reduction need not give the mean of equal values exactly).
    flat_context = _expected_context().reshape(batch, -1)
    dense = np.abs(flat_context.sum(axis=-1, dtype=np.float64)).astype(np.float32)
    bound = 8 * np.spacing(dense) / np.sqrt(1e-3)
    assert np.all(np.abs(out) <= np.maximum(bound, 1e-5)[:, None]), (out, bound)


def _keras_inputs(q_mask):
    batch = len(FROM_LENS)
    layers = [
        keras.Input((FROM_LENS.max(),), batch_size=batch),
        keras.Input((1,), batch_size=batch, dtype=tf.int32),
        keras.Input((TO_LENS.max(),), batch_size=batch),
        keras.Input((1,), batch_size=batch, dtype=tf.int32),
    ]
    if q_mask is not None:
        layers.append(keras.Input((HEADS,), batch_size=batch, dtype=tf.bool))
    return layers


@pytest.mark.follows("testMismatchedSequenceRanks")
def test_mismatched_sequence_ranks():
    lengths = np.array([3] * 3, np.int32)
    with pytest.raises(ValueError, match="must be equal rank"):
        EffectiveTransformer(12, 10)(
            [np.zeros((3, 3, 1), np.float32), lengths, np.zeros((3, 3), np.float32), lengths]
        )


@pytest.mark.follows("testMismatchedSequenceCount")
def test_mismatched_sequence_count():
    inputs = [
        np.zeros((4, 3), np.float32),
        np.array([3] * 4, np.int32),
        np.zeros((3, 3), np.float32),
        np.array([3] * 3, np.int32),
    ]
    with pytest.raises(ValueError, match="must contain an equal number of sequences"):
        EffectiveTransformer(12, 10)(inputs)


@pytest.mark.follows("testMismatchedSequenceLen")
@pytest.mark.follows("testMismatchedSequenceLen2")
@pytest.mark.parametrize("from_count,to_count", [(4, 4), (3, 2)])
def test_mismatched_sequence_len(from_count, to_count):
    sequences = np.zeros((3, 3), np.float32)
    inputs = [
        sequences,
        np.array([3] * from_count, np.int32),
        sequences,
        np.array([3] * to_count, np.int32),
    ]
    with pytest.raises(ValueError, match="have lengths equal to the number of sequences provided"):
        EffectiveTransformer(12, 10)(inputs)


@pytest.mark.follows("testMismatchedDtypes")
def test_mismatched_dtypes():
    lengths = np.array([3] * 3, np.int32)
    inputs = [np.zeros((3, 3), np.float16), lengths, np.zeros((3, 3), np.int32), lengths]
    with pytest.raises(ValueError, match="from_sequences and to_sequences must be equal types"):
        EffectiveTransformer(12, 10)(inputs)


@pytest.mark.follows("testIncorrectQMask")
@pytest.mark.follows("testIncorrectQMask2")
@pytest.mark.parametrize("mask_shape", [(3, 2), (4, 1)])
def test_incorrect_q_mask(mask_shape):
    sequences = np.zeros((3, 3), np.float32)
    lengths = np.array([3] * 3, np.int32)
    inputs = [sequences, lengths, sequences, lengths, np.zeros(mask_shape, np.bool_)]
    with pytest.raises(ValueError, match="q_mask must have shape"):
        EffectiveTransformer(12, 10)(inputs)


@pytest.mark.follows("testInference")
@pytest.mark.parametrize("case", CASES)
def test_inference(strategy, case):
    use_scale, q_mask = CASES[case]["use_scale"], CASES[case]["q_mask"]
    with strategy.scope():
        transformer = _transformer(use_scale)
        step = tf.function(lambda inputs: transformer(inputs), jit_compile=True)
        out, context = strategy.run(step, args=[_inputs(q_mask)])
    _check_results(out.numpy(), context.numpy())


@pytest.mark.follows("testInferenceKeras")
@pytest.mark.parametrize("case", CASES)
def test_inference_keras(strategy, case):
    use_scale, q_mask = CASES[case]["use_scale"], CASES[case]["q_mask"]
    with strategy.scope():
        layers = _keras_inputs(q_mask)
        model = keras.Model(layers, _transformer(use_scale)(layers))
        model.compile(keras.optimizers.SGD(0.001), loss="mse")
        out, context = model.predict(_inputs(q_mask), batch_size=len(FROM_LENS), verbose=0)
    _check_results(out, context)


@pytest.mark.follows("testTraining")
@pytest.mark.parametrize("case", CASES)
def test_training(strategy, case):
    use_scale, q_mask = CASES[case]["use_scale"], CASES[case]["q_mask"]
    targets = np.ones((len(FROM_LENS), OUTPUT_SIZE), np.float32)
    with strategy.scope():
        transformer = _transformer(use_scale)
        optimizer = keras.optimizers.SGD(0.01)

        @tf.function(jit_compile=True)
        def step(inputs, targets):
            with tf.GradientTape() as tape:
                # One loss per example, as the original's loop (its gradient: of their sum).
                loss = keras.losses.mean_squared_error(targets, transformer(inputs)[0])
            variables = transformer.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
            return loss

        losses = [float(strategy.run(step, [_inputs(q_mask), targets])[0]) for _ in range(3)]
    assert (np.diff(losses) < 0).all(), losses


@pytest.mark.follows("testTrainingKeras")
@pytest.mark.parametrize("case", CASES)
def test_training_keras(strategy, case):
    use_scale, q_mask = CASES[case]["use_scale"], CASES[case]["q_mask"]
    targets = np.ones((len(FROM_LENS), OUTPUT_SIZE), np.float32)
    with strategy.scope():
        layers = _keras_inputs(q_mask)
        model = keras.Model(layers, _transformer(use_scale)(layers)[0])
        model.compile(keras.optimizers.SGD(0.1), "mse")
        history = model.fit(
            _inputs(q_mask), targets, batch_size=len(FROM_LENS), epochs=3, verbose=0
        )
    losses = history.history["loss"]
    assert (np.diff(losses) < 0).all(), losses


@pytest.mark.follows("testSerialize")
@pytest.mark.parametrize("use_scale", [False, True])
def test_serialize(use_scale):
    transformer = EffectiveTransformer(
        output_layer_size=OUTPUT_SIZE,
        max_batch_size=10,
        use_scale=use_scale,
        num_attention_heads=HEADS,
        attention_head_size=HEAD_SIZE,
        sequences_per_iter=2,
        embedding_initializer=keras.initializers.Ones(),
        output_initializer=keras.initializers.Ones(),
        embedding_bias_initializer=keras.initializers.Zeros(),
        output_bias_initializer=keras.initializers.Zeros(),
    )
    config = transformer.get_config()
    assert EffectiveTransformer.from_config(config).get_config() == config
    assert config["use_scale"] is use_scale


UNPAD_CASES = [
    (
        [[1, 1, 0, 0], [2, 2, 2, 0], [3, 0, 0, 0], [4, 4, 0, 0]],
        [[1, 1, 2, 2], [2, 3, 4, 4], [0, 0, 0, 0], [0, 0, 0, 0]],
        [2, 3, 1, 2],
    ),
    ([[1] * 4, [2] * 4, [3] * 4, [4] * 4], [[1] * 4, [2] * 4, [3] * 4, [4] * 4], [4, 4, 4, 4]),
    (
        [[1, 0, 0, 0], [2, 0, 0, 0], [3, 0, 0, 0], [4, 0, 0, 0]],
        [[1, 2, 3, 4], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
        [1, 1, 1, 1],
    ),
]


@pytest.mark.follows("testSequenceUnpad")
@pytest.mark.parametrize("padded,unpadded,lengths", UNPAD_CASES)
def test_sequence_unpad(strategy, padded, unpadded, lengths):
    padded = np.array(padded, np.float32)
    lengths = np.array(lengths, np.int32)

    @tf.function(jit_compile=True)
    def unpad():
        return EffectiveTransformer(12, 10)._unpad(padded, lengths, len(lengths))

    with strategy.scope():
        result = strategy.run(unpad)
    np.testing.assert_array_equal(result, np.array(unpadded, np.float32))
