"""The padding-aware attention layer (`ipu_tensorflow_addons.keras.layers.EffectiveTransformer`)."""

from __future__ import annotations

import numbers

import tensorflow as tf
import tf_keras

from openipu._src.int_like import plain_int
from openipu._src.keras.layers.dropout import Dropout
from openipu._src.keras.layers.layer_normalization import LayerNormalization

_OWNER = "EffectiveTransformer"


@tf_keras.utils.register_keras_serializable(package="openipu")
class EffectiveTransformer(tf_keras.layers.Layer):
    """Multi-head attention from padded "from" sequences to padded "to" sequences.

    `call([from_seq, from_len, to_seq, to_len(, q_mask)], training=True)` takes
    sequences `[B, N]` of scalar tokens, their lengths `[B]` (or `[B, 1]`) and
    an optional bool head mask `[B, num_attention_heads]`, and returns
    `(out [B, output_layer_size], context [B, Nf, heads, head_size] float32)`.
    Lengths are clipped to `[0, N]`.

    For each example: the query, key and value of a valid position `t` are
    `qkv_activation(x[t] * w + b)` (a Dense from 1 to heads * head_size), and
    exact zero vectors at padded positions. The attention logits are
    `scale * Q_h K_h^T` (no 1/sqrt(head_size); `scale` is a learned scalar
    starting at 1 when `use_scale`, else 1); the context `softmax(logits) V_h`
    is multiplied by `q_mask`; `out` is a Dense of the flattened context with
    `output_activation`, then output dropout, then the IPU LayerNormalization
    (epsilon 1e-3) when `layer_norm_output`.

    Padding (fact sheet 1.6, compatibility kept by default): like the
    original, padded keys take part in the softmax with logit 0 and padded
    queries attend uniformly. `mask_padding=True` (an openipu extension)
    excludes padded keys from the softmax and gives padded queries (and
    examples with no valid key) a zero context.

    CONFLICT (dropout): `attention_dropout_prob` is applied to the attention
    distribution, as the API text says (the original's code drops the context
    instead). The original's output-dropout indexing bug is not reproduced.

    `max_batch_size` and `sequences_per_iter` size the IPU's packing of the
    unpadded sequences into chunks; they are validated and kept but, on the
    host, the dense masked computation is done in one piece: packing changes
    memory use, never the result.
    """

    def __init__(
        self,
        output_layer_size: int,
        max_batch_size: int,
        use_scale: bool = False,
        num_attention_heads: int = 1,
        attention_head_size: int = 1,
        sequences_per_iter: int = 1,
        qkv_activation=None,
        attention_dropout_prob=None,
        output_activation=None,
        output_dropout_prob=None,
        layer_norm_output: bool = True,
        embedding_initializer="glorot_uniform",
        embedding_bias_initializer="zeros",
        output_initializer="glorot_uniform",
        output_bias_initializer="zeros",
        mask_padding: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        # The inputs' dtypes are checked against each other before any cast.
        self._autocast = False
        self.output_layer_size = _positive_int("output_layer_size", output_layer_size)
        self.max_batch_size = _positive_int("max_batch_size", max_batch_size)
        self.num_attention_heads = _positive_int("num_attention_heads", num_attention_heads)
        self.attention_head_size = _positive_int("attention_head_size", attention_head_size)
        self.sequences_per_iter = _positive_int("sequences_per_iter", sequences_per_iter)
        if self.sequences_per_iter > self.max_batch_size:
            raise ValueError(
                f"{_OWNER}: max_batch_size must be greater than sequences_per_iter, got "
                f"max_batch_size={self.max_batch_size}, sequences_per_iter={self.sequences_per_iter}"
            )
        # The original takes these flags by truth value (keras/layers/effective_transformer.py).
        self.use_scale = use_scale
        self.layer_norm_output = layer_norm_output
        self.mask_padding = _bool("mask_padding", mask_padding)
        self.attention_dropout_prob = _probability("attention_dropout_prob", attention_dropout_prob)
        self.output_dropout_prob = _probability("output_dropout_prob", output_dropout_prob)
        self.qkv_activation = tf_keras.activations.get(qkv_activation)
        self.output_activation = tf_keras.activations.get(output_activation)
        self.embedding_initializer = tf_keras.initializers.get(embedding_initializer)
        self.embedding_bias_initializer = tf_keras.initializers.get(embedding_bias_initializer)
        self.output_initializer = tf_keras.initializers.get(output_initializer)
        self.output_bias_initializer = tf_keras.initializers.get(output_bias_initializer)

        embedding_size = self.num_attention_heads * self.attention_head_size
        self.query_embedding, self.key_embedding, self.value_embedding = (
            tf_keras.layers.Dense(
                embedding_size,
                activation=self.qkv_activation,
                kernel_initializer=_fresh(self.embedding_initializer),
                bias_initializer=_fresh(self.embedding_bias_initializer),
                name=role,
            )
            for role in ("query", "key", "value")
        )
        self.output_dense = tf_keras.layers.Dense(
            self.output_layer_size,
            activation=self.output_activation,
            kernel_initializer=self.output_initializer,
            bias_initializer=self.output_bias_initializer,
            name="output",
        )
        self.attention_dropout = (
            Dropout(self.attention_dropout_prob, name="attention_dropout")
            if self.attention_dropout_prob
            else None
        )
        self.output_dropout = (
            Dropout(self.output_dropout_prob, name="output_dropout")
            if self.output_dropout_prob
            else None
        )
        self.output_layer_norm = (
            LayerNormalization(epsilon=1e-3, name="output_layer_norm")
            if self.layer_norm_output
            else None
        )

    def build(self, input_shapes) -> None:
        if not isinstance(input_shapes, (list, tuple)) or len(input_shapes) not in (4, 5):
            raise ValueError(
                f"{_OWNER}: build expects a list of 4 or 5 input shapes (from_sequences, "
                "from_sequence_lengths, to_sequences, to_sequence_lengths[, q_mask]), got "
                f"{input_shapes!r}"
            )
        from_shape = tf.TensorShape(input_shapes[0])
        to_shape = tf.TensorShape(input_shapes[2])
        if from_shape.rank is not None and from_shape.rank != to_shape.rank:
            # The original names the rank mismatch first (effective_transformer_test.py).
            raise ValueError(
                f"{_OWNER}: from_sequences and to_sequences must be equal rank, got shapes "
                f"{from_shape} and {to_shape}"
            )
        if from_shape.rank != 2 or from_shape[1] is None:
            raise ValueError(
                f"{_OWNER}: from_sequences must have a known shape [batch, length], got {from_shape}"
            )
        token_shape = (None, None, 1)
        for embedding in (self.query_embedding, self.key_embedding, self.value_embedding):
            embedding.build(token_shape)
        flat_context = from_shape[1] * self.num_attention_heads * self.attention_head_size
        self.output_dense.build((None, flat_context))
        if self.output_layer_norm is not None:
            self.output_layer_norm.build((None, self.output_layer_size))
        self.scale = None
        if self.use_scale:
            self.scale = self.add_weight("scale", shape=(), initializer="ones", dtype=self.dtype)
        super().build(input_shapes)

    def call(self, inputs, training=True):
        if not isinstance(inputs, (list, tuple)) or len(inputs) not in (4, 5):
            raise ValueError(
                f"{_OWNER}: inputs must be a list of 4 or 5 tensors (from_sequences, "
                "from_sequence_lengths, to_sequences, to_sequence_lengths[, q_mask]), got "
                f"{type(inputs).__name__} of length "
                f"{len(inputs) if isinstance(inputs, (list, tuple)) else 1}"
            )
        from_seq, from_len, to_seq, to_len = (tf.convert_to_tensor(x) for x in inputs[:4])
        q_mask = tf.convert_to_tensor(inputs[4]) if len(inputs) == 5 else None
        from_len, to_len = self._check_inputs(from_seq, from_len, to_seq, to_len, q_mask)
        heads, head_size = self.num_attention_heads, self.attention_head_size
        dtype = tf.as_dtype(self.compute_dtype)
        from_seq, to_seq = tf.cast(from_seq, dtype), tf.cast(to_seq, dtype)
        from_valid = _valid_positions(from_len, tf.shape(from_seq)[1])
        to_valid = _valid_positions(to_len, tf.shape(to_seq)[1])

        def embed(layer, tokens, valid):
            values = layer(tokens[..., None])
            # Padded positions are exact zeros: the bias and activation do not reach them.
            values = tf.where(valid[..., None], values, tf.zeros_like(values))
            return tf.reshape(values, [tf.shape(tokens)[0], tf.shape(tokens)[1], heads, head_size])

        queries = embed(self.query_embedding, from_seq, from_valid)
        keys = embed(self.key_embedding, to_seq, to_valid)
        values = embed(self.value_embedding, to_seq, to_valid)

        logits = tf.einsum("bqhd,bkhd->bhqk", queries, keys)
        if self.scale is not None:
            logits *= tf.cast(self.scale, dtype)
        if self.mask_padding:
            key_valid = to_valid[:, None, None, :]
            logits = tf.where(key_valid, logits, tf.constant(dtype.min, dtype))
            attention = tf.nn.softmax(logits, axis=-1)
            query_valid = from_valid[:, None, :, None]
            attention = tf.where(key_valid & query_valid, attention, tf.zeros_like(attention))
        else:
            attention = tf.nn.softmax(logits, axis=-1)
        if self.attention_dropout is not None:
            attention = self.attention_dropout(attention, training=training)
        context = tf.einsum("bhqk,bkhd->bqhd", attention, values)
        if q_mask is not None:
            context *= tf.cast(q_mask, dtype)[:, None, :, None]

        flat_context = tf.reshape(context, [tf.shape(context)[0], -1])
        flat_context.set_shape([None, from_seq.shape[1] * heads * head_size])
        out = self.output_dense(flat_context)
        if self.output_dropout is not None:
            out = self.output_dropout(out, training=training)
        if self.output_layer_norm is not None:
            out = self.output_layer_norm(out)
        return out, tf.cast(context, tf.float32)

    def _check_inputs(self, from_seq, from_len, to_seq, to_len, q_mask):
        """Raises on inconsistent inputs; returns the lengths as int32 vectors."""
        if from_seq.shape.rank != to_seq.shape.rank:
            raise ValueError(
                f"{_OWNER}: from_sequences and to_sequences must be equal rank, got shapes "
                f"{from_seq.shape} and {to_seq.shape}"
            )
        if from_seq.shape.rank != 2:
            raise ValueError(
                f"{_OWNER}: the sequences must have shape [batch, length] (scalar tokens), "
                f"got {from_seq.shape}"
            )
        batch = from_seq.shape[0]
        if not tf.TensorShape([batch]).is_compatible_with([to_seq.shape[0]]):
            raise ValueError(
                f"{_OWNER}: from_sequences and to_sequences must contain an equal number of "
                f"sequences, got {from_seq.shape[0]} and {to_seq.shape[0]}"
            )
        if from_seq.dtype != to_seq.dtype:
            raise ValueError(
                f"{_OWNER}: from_sequences and to_sequences must be equal types, got "
                f"{from_seq.dtype.name} and {to_seq.dtype.name}"
            )
        lengths = []
        for name, length in (("from_sequence_lengths", from_len), ("to_sequence_lengths", to_len)):
            if length.shape.rank == 2 and length.shape[1] == 1:
                length = tf.squeeze(length, axis=1)
            if length.shape.rank != 1 or not length.shape.is_compatible_with([batch]):
                raise ValueError(
                    f"{_OWNER}: {name} must have lengths equal to the number of sequences "
                    f"provided (shape [{batch}]), got shape {length.shape}"
                )
            if not length.dtype.is_integer:
                raise TypeError(f"{_OWNER}: {name} must be integers, got {length.dtype.name}")
            lengths.append(tf.cast(length, tf.int32))
        if q_mask is not None:
            expected = tf.TensorShape([batch, self.num_attention_heads])
            if q_mask.shape.rank != 2 or not q_mask.shape.is_compatible_with(expected):
                raise ValueError(
                    f"{_OWNER}: q_mask must have shape {expected} (batch, num_attention_heads), "
                    f"got {q_mask.shape}"
                )
        return lengths

    def _unpad(self, sequences, sequence_lengths, num_sequences=None) -> tf.Tensor:
        """The valid tokens of `sequences` `[B, N]`, packed row-major into a `[B, N]` buffer.

        The tokens follow one another across rows in sequence order; the rest of the
        buffer is zeros. The original's tests call this helper on the IPU (its
        `effective_transformer_test.py` `testSequenceUnpad`); `num_sequences` sizes the
        original's slicing loop and changes nothing here.
        """
        del num_sequences
        sequences = tf.convert_to_tensor(sequences)
        lengths = tf.reshape(tf.cast(sequence_lengths, tf.int32), [-1])
        valid = tf.reshape(_valid_positions(lengths, tf.shape(sequences)[1]), [-1])
        # A stable sort of "is padding" puts the valid tokens first, in their order.
        order = tf.argsort(tf.cast(~valid, tf.int32), stable=True)
        packed = tf.gather(tf.reshape(sequences, [-1]), order)
        total = tf.reduce_sum(tf.cast(valid, tf.int32))
        packed = tf.where(tf.range(tf.size(packed)) < total, packed, tf.zeros_like(packed))
        return tf.reshape(packed, tf.shape(sequences))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "output_layer_size": self.output_layer_size,
            "max_batch_size": self.max_batch_size,
            "use_scale": self.use_scale,
            "num_attention_heads": self.num_attention_heads,
            "attention_head_size": self.attention_head_size,
            "sequences_per_iter": self.sequences_per_iter,
            "qkv_activation": tf_keras.activations.serialize(self.qkv_activation),
            "attention_dropout_prob": self.attention_dropout_prob,
            "output_activation": tf_keras.activations.serialize(self.output_activation),
            "output_dropout_prob": self.output_dropout_prob,
            "layer_norm_output": self.layer_norm_output,
            "embedding_initializer": tf_keras.initializers.serialize(self.embedding_initializer),
            "embedding_bias_initializer": tf_keras.initializers.serialize(
                self.embedding_bias_initializer
            ),
            "output_initializer": tf_keras.initializers.serialize(self.output_initializer),
            "output_bias_initializer": tf_keras.initializers.serialize(
                self.output_bias_initializer
            ),
            "mask_padding": self.mask_padding,
        }


def _fresh(initializer):
    """A new instance of `initializer`: a shared instance would give q, k and v equal weights."""
    return tf_keras.initializers.deserialize(tf_keras.initializers.serialize(initializer))


def _valid_positions(lengths: tf.Tensor, max_length: tf.Tensor) -> tf.Tensor:
    """`[B, N]` bool, True where a position is inside its sequence."""
    return tf.range(max_length)[None, :] < tf.clip_by_value(lengths, 0, max_length)[:, None]


def _positive_int(name: str, value) -> int:
    value = plain_int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{_OWNER}: {name} must be a positive integer, got {value!r}")
    return int(value)


def _bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{_OWNER}: {name} must be a bool, got {value!r}")
    return value


def _probability(name: str, value) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0.0 <= float(value) < 1.0
    ):
        raise ValueError(f"{_OWNER}: {name} must be None or a float in [0, 1), got {value!r}")
    return float(value)
