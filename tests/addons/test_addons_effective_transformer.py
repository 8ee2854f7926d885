import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tensorflow.python import ipu

from openipu._src.addons.keras.layers.effective_transformer import EffectiveTransformer

B, NF, NT, H, D, OUT = 3, 4, 5, 2, 3, 6
FROM_LEN, TO_LEN = [4, 2, 0], [5, 1, 3]
Q_MASK = [[True, False], [True, True], [False, True]]


def _inputs(seed=0, q_mask=True, from_len=FROM_LEN, to_len=TO_LEN):
    rng = np.random.default_rng(seed)
    inputs = [
        tf.constant(rng.normal(size=(B, NF)), tf.float32),
        tf.constant(from_len, tf.int32),
        tf.constant(rng.normal(size=(B, NT)), tf.float32),
        tf.constant(to_len, tf.int32),
    ]
    return inputs + [tf.constant(Q_MASK)] if q_mask else inputs


def _layer(seed=0, **kwargs):
    """A built layer whose weights (including biases, scale, beta, gamma) are random."""
    options = dict(
        output_layer_size=OUT,
        max_batch_size=4,
        num_attention_heads=H,
        attention_head_size=D,
        use_scale=True,
        qkv_activation="tanh",
        output_activation="relu",
    )
    options.update(kwargs)
    layer = EffectiveTransformer(**options)
    layer(_inputs(q_mask=False))
    rng = np.random.default_rng(100 + seed)
    layer.set_weights([rng.normal(size=w.shape).astype(np.float32) for w in layer.get_weights()])
    return layer


def _reference(layer, inputs, mask_padding=False):
    """Per-example, per-head attention written out with explicit loops."""
    from_seq, from_len, to_seq, to_len = inputs[:4]
    q_mask = inputs[4] if len(inputs) == 5 else tf.ones((B, H), tf.bool)
    act = tf_keras.activations.get(layer.get_config()["qkv_activation"])
    scale = layer.scale if layer.scale is not None else 1.0

    def embed(dense, tokens, length):
        rows = [
            act(tokens[t] * dense.kernel[0] + dense.bias) if t < length else tf.zeros(H * D)
            for t in range(tokens.shape[0])
        ]
        return tf.stack(rows)

    flat_contexts, contexts = [], []
    for b in range(B):
        q = embed(layer.query_embedding, from_seq[b], int(from_len[b]))
        k = embed(layer.key_embedding, to_seq[b], int(to_len[b]))
        v = embed(layer.value_embedding, to_seq[b], int(to_len[b]))
        heads = []
        for h in range(H):
            part = slice(h * D, (h + 1) * D)
            logits = scale * tf.matmul(q[:, part], k[:, part], transpose_b=True)
            if mask_padding:
                valid_keys = int(to_len[b])
                probs = (
                    tf.concat(
                        [tf.nn.softmax(logits[:, :valid_keys]), tf.zeros((NF, NT - valid_keys))], 1
                    )
                    if valid_keys
                    else tf.zeros((NF, NT))
                )
                row_valid = tf.cast(tf.range(NF) < int(from_len[b]), tf.float32)[:, None]
                probs *= row_valid
            else:
                probs = tf.nn.softmax(logits)
            heads.append(tf.matmul(probs, v[:, part]) * tf.cast(q_mask[b, h], tf.float32))
        context = tf.stack(heads, axis=1)
        contexts.append(context)
        flat_contexts.append(tf.reshape(context, [-1]))
    dense = layer.output_dense
    out_act = tf_keras.activations.get(layer.get_config()["output_activation"])
    out = out_act(tf.stack(flat_contexts) @ dense.kernel + dense.bias)
    if layer.output_layer_norm is not None:
        norm = layer.output_layer_norm
        mean, var = tf.nn.moments(out, axes=[1], keepdims=True)
        out = (out - mean) / tf.sqrt(var + 1e-3) * norm.gamma + norm.beta
    return out, tf.stack(contexts)


@pytest.mark.parametrize("mask_padding", [False, True])
@pytest.mark.parametrize("q_mask", [True, False])
def test_matches_reference_eager_and_compiled(mask_padding, q_mask):
    layer = _layer(mask_padding=mask_padding)
    inputs = _inputs(q_mask=q_mask)
    expected_out, expected_context = _reference(layer, inputs, mask_padding)
    compiled = tf.function(lambda x: layer(x, training=False), jit_compile=True)
    for out, context in (layer(inputs, training=False), compiled(inputs)):
        assert out.shape == [B, OUT] and context.shape == [B, NF, H, D]
        assert context.dtype == tf.float32
        np.testing.assert_allclose(out.numpy(), expected_out.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(context.numpy(), expected_context.numpy(), rtol=1e-4, atol=1e-6)


def test_compat_mode_worked_numbers():
    # One head of size one, identity embeddings (kernel 1, bias 0), no scale, no layer norm:
    # the query of token 2 against keys [1, pad] has logits [2, 0] (padded key, not masked).
    layer = EffectiveTransformer(
        1, 1, layer_norm_output=False, embedding_initializer="ones", output_initializer="ones"
    )
    inputs = [tf.constant([[2.0]]), tf.constant([1]), tf.constant([[1.0, 9.0]]), tf.constant([1])]
    out, context = layer(inputs, training=False)
    expected = np.exp(2.0) / (np.exp(2.0) + 1.0)  # the padded value is 0
    np.testing.assert_allclose(context.numpy().ravel(), [expected], rtol=1e-6)
    np.testing.assert_allclose(out.numpy().ravel(), [expected], rtol=1e-6)
    masked = EffectiveTransformer(
        1,
        1,
        layer_norm_output=False,
        embedding_initializer="ones",
        output_initializer="ones",
        mask_padding=True,
    )
    np.testing.assert_allclose(masked(inputs, training=False)[1].numpy().ravel(), [1.0])


@pytest.mark.parametrize("max_batch_size, sequences_per_iter", [(1, 1), (2, 1), (3, 2), (8, 8)])
def test_packing_parameters_do_not_change_results(max_batch_size, sequences_per_iter):
    reference = _layer(max_batch_size=4, sequences_per_iter=1)
    packed = _layer(max_batch_size=max_batch_size, sequences_per_iter=sequences_per_iter)
    inputs = _inputs()
    for a, b in zip(reference(inputs, training=False), packed(inputs, training=False), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_padding_values_do_not_matter():
    layer = _layer()
    inputs, other = _inputs(seed=1), _inputs(seed=1)
    other[0] = tf.where(tf.range(NF)[None] < other[1][:, None], other[0], 123.0)
    other[2] = tf.where(tf.range(NT)[None] < other[3][:, None], other[2], -7.0)
    for a, b in zip(layer(inputs, training=False), layer(other, training=False), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_lengths_of_shape_batch_by_one_are_accepted():
    layer = _layer()
    inputs = _inputs()
    column = list(inputs)
    column[1], column[3] = column[1][:, None], column[3][:, None]
    for a, b in zip(layer(inputs, training=False), layer(column, training=False), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy())


@pytest.mark.parametrize("mask_padding", [False, True])
def test_gradients_match_reference(mask_padding):
    layer = _layer(mask_padding=mask_padding)
    inputs = _inputs()
    weights = layer.trainable_weights
    assert len(weights) == 11  # q, k, v, output (kernel, bias), scale, gamma, beta

    def grads(fn):
        with tf.GradientTape() as tape:
            tape.watch(inputs[0])
            out, context = fn(inputs)
            loss = tf.reduce_sum(out * tf.range(1.0, OUT + 1)) + tf.reduce_sum(context**2)
        return tape.gradient(loss, weights + [inputs[0]])

    expected = grads(lambda x: _reference(layer, x, mask_padding))
    compiled = tf.function(lambda: grads(lambda x: layer(x, training=False)), jit_compile=True)
    for got in (grads(lambda x: layer(x, training=False)), compiled()):
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)


def test_dropout_only_in_training():
    plain = _layer()
    dropping = _layer(attention_dropout_prob=0.5, output_dropout_prob=0.5)
    inputs = _inputs()
    for a, b in zip(plain(inputs, training=False), dropping(inputs, training=False), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    _, trained_context = dropping(inputs, training=True)
    _, context = plain(inputs, training=False)
    assert np.all(np.isfinite(trained_context.numpy()))
    assert not np.allclose(trained_context.numpy(), context.numpy())


def test_attention_dropout_keeps_the_expected_context():
    # Dropout of the attention distribution, rescaled by 1/(1-p): averaged over many
    # independent copies of the batch, the context tends to the undropped one.
    copies = 300
    layer = _layer(attention_dropout_prob=0.3, layer_norm_output=False)
    inputs = _inputs(q_mask=False)
    tiled = [tf.tile(x, [copies] + [1] * (x.shape.rank - 1)) for x in inputs]
    _, dropped = layer(tiled, training=True)
    averaged = tf.reduce_mean(tf.reshape(dropped, [copies, B, NF, H, D]), axis=0)
    _, expected = layer(inputs, training=False)
    np.testing.assert_allclose(averaged.numpy(), expected.numpy(), atol=0.1)
    assert np.any(dropped.numpy() != np.tile(expected.numpy(), [copies, 1, 1, 1]))


def test_config_round_trip():
    layer = EffectiveTransformer(
        5,
        4,
        use_scale=True,
        num_attention_heads=2,
        attention_head_size=3,
        sequences_per_iter=2,
        qkv_activation="gelu",
        attention_dropout_prob=0.1,
        output_activation="tanh",
        output_dropout_prob=0.2,
        layer_norm_output=False,
        embedding_initializer="ones",
        embedding_bias_initializer="zeros",
        output_initializer="he_normal",
        output_bias_initializer="ones",
        mask_padding=True,
        name="attention",
    )
    config = layer.get_config()
    clone = EffectiveTransformer.from_config(config)
    assert clone.get_config() == config
    assert config["sequences_per_iter"] == 2 and config["mask_padding"] is True


def test_fit_and_predict_in_a_model(ipu_system):
    # On the IPU, whose Keras steps have static shapes (the original's layer needs them: its
    # buffers and its layer normalisation take the static number of sequences).
    strategy = ipu.ipu_strategy.IPUStrategy()
    x = [t.numpy() for t in _inputs(q_mask=False)]
    y = np.random.default_rng(9).normal(size=(B, OUT)).astype(np.float32)
    with strategy.scope():
        sequences = [
            tf_keras.Input((NF,), batch_size=B),
            tf_keras.Input((), batch_size=B, dtype=tf.int32),
            tf_keras.Input((NT,), batch_size=B),
            tf_keras.Input((), batch_size=B, dtype=tf.int32),
        ]
        layer = EffectiveTransformer(OUT, 4, num_attention_heads=H, attention_head_size=D)
        out, _ = layer(sequences)
        model = tf_keras.Model(sequences, out)
        model.compile(tf_keras.optimizers.Adam(0.05), loss="mse")
        before = model.evaluate(x, y, batch_size=B, verbose=0)
        model.fit(x, y, epochs=10, batch_size=B, verbose=0)
        assert model.evaluate(x, y, batch_size=B, verbose=0) < before
        predicted = model.predict(x, batch_size=B, verbose=0)
    expected, _ = _reference(layer, _inputs(q_mask=False))
    np.testing.assert_allclose(predicted, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            dict(max_batch_size=2, sequences_per_iter=3),
            "max_batch_size must be greater than sequences_per_iter",
        ),
        (dict(max_batch_size=0), "max_batch_size must be a positive integer, got 0"),
        (dict(num_attention_heads=1.5), "num_attention_heads must be a positive integer"),
        (dict(attention_dropout_prob=1.0), "attention_dropout_prob must be None or a float"),
        (dict(output_dropout_prob=-0.1), "output_dropout_prob must be None or a float"),
    ],
)
def test_constructor_errors(kwargs, match):
    options = dict(output_layer_size=2, max_batch_size=4)
    options.update(kwargs)
    with pytest.raises(ValueError, match=match):
        EffectiveTransformer(**options)


def test_flags_are_taken_by_truth_value_as_in_the_original():
    inputs = _inputs()
    for flags in (dict(use_scale=1, layer_norm_output=0), dict(use_scale=0, layer_norm_output=1)):
        plain = {name: bool(value) for name, value in flags.items()}
        got = _layer(**flags)(inputs, training=False)
        expected = _layer(**plain)(inputs, training=False)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="mask_padding must be a bool"):  # openipu's own flag
        EffectiveTransformer(2, 2, mask_padding="yes")


def test_build_needs_four_or_five_shapes():
    with pytest.raises(ValueError, match="build expects a list of 4 or 5 input shapes"):
        EffectiveTransformer(2, 2).build([(B, NF), (B,), (B, NT)])


def test_call_needs_four_or_five_inputs():
    layer = _layer()
    with pytest.raises(ValueError, match="inputs must be a list of 4 or 5 tensors"):
        layer.call(_inputs() + [tf.constant(Q_MASK)])


def _bad_inputs(index, value):
    inputs = _inputs()
    inputs[index] = value
    return inputs


@pytest.mark.parametrize(
    "inputs, match",
    [
        (_bad_inputs(2, tf.zeros((B, NT, 1))), "must be equal rank"),
        (_bad_inputs(2, tf.zeros((B + 1, NT))), "must contain an equal number of sequences"),
        (_bad_inputs(1, tf.constant([1, 2])), "from_sequence_lengths must have lengths equal"),
        (_bad_inputs(3, tf.zeros((B, 2), tf.int32)), "to_sequence_lengths must have lengths equal"),
        (_bad_inputs(2, tf.zeros((B, NT), tf.float64)), "must be equal types"),
        (_bad_inputs(4, tf.ones((B, H + 1), tf.bool)), "q_mask must have shape"),
    ],
)
def test_call_errors(inputs, match):
    layer = _layer()
    with pytest.raises(ValueError, match=match):
        layer(inputs)


def test_sequences_must_be_scalar_tokens():
    layer = _layer()
    inputs = _bad_inputs(0, tf.zeros((B, NF, 1)))
    inputs[2] = tf.zeros((B, NT, 1))
    with pytest.raises(ValueError, match="must have shape \\[batch, length\\] \\(scalar tokens\\)"):
        layer(inputs)


def test_lengths_must_be_integers():
    with pytest.raises(TypeError, match="from_sequence_lengths must be integers, got float32"):
        _layer()(_bad_inputs(1, tf.constant([1.0, 2.0, 3.0])))
