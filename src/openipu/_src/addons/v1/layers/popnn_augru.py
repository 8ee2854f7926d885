"""`ipu_tensorflow_addons.v1.layers.PopnnAUGRU`: a GRU whose update gate attention scales."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.addons.v1.layers.popnn_gru import PopnnGRU


class PopnnAUGRU(PopnnGRU):
    """XLA compatible, time-major Popnn implementation of an AUGRU layer.

    An AUGRU is a GRU with sequence lengths whose update gate `z` becomes
    `(1 - a_t) * z` for the attention score `a_t` of the step: `a = 0` is a
    plain GRU, `a = 1` takes the candidate state whole.

    As in the original, `call` uses bias variables of its own, `bias_r_u
    [2, num_units]` (ones) and `bias_c [1, num_units]` (zeros), whatever
    `bias_initializer` says (`GRUCell`'s default biases); with `reset_after`
    the input and the recurrent bias are the same variables. The `biases`
    variable of `build` is created but not used.
    """

    def call(  # type: ignore[override]  # takes seq_len and attention scores, as the original
        self,
        inputs,
        seq_len,
        attention_score,
        initial_state=None,
        training=True,
        time_major=True,
    ):
        """`(output [T, B, num_units], state [B, num_units])`, or `output` without return_state.

        `attention_score` is `[T, B]`, or `[B, T]` with `time_major=False`: the
        original transposes it together with the inputs.
        """
        del training
        inputs = self._as_inputs(inputs, time_major)
        attention = tf.convert_to_tensor(attention_score, dtype=self._plain_dtype)
        if not time_major:
            attention = tf.transpose(attention, [1, 0])
        self._check_attention(inputs, attention, time_major)
        outputs, state = self._run(
            inputs,
            self._augru_biases(),
            initial_state,
            sequence_lengths=self._as_seq_len(seq_len),
            attention=attention,
        )
        return self._result(outputs, state)

    def _check_attention(self, inputs: tf.Tensor, attention: tf.Tensor, time_major: bool) -> None:
        layout = "[time_len, batch_size]" if time_major else "[batch_size, time_len]"
        expected = inputs.shape[:2]
        if attention.shape.rank != 2 or not attention.shape.is_compatible_with(expected):
            shown = expected if time_major else tf.TensorShape([expected[1], expected[0]])
            raise ValueError(
                f"{type(self).__name__}: attention_score must have shape {layout} = {shown} "
                f"for inputs of shape {inputs.shape} with time_major={time_major}"
            )

    def _augru_biases(self) -> tf.Tensor:
        # The original creates these in `call` (v1/layers/rnn_ops.py, PopnnAUGRU.call).
        if not hasattr(self, "_bias_r_u"):
            with tf.compat.v1.variable_scope(
                tf.compat.v1.get_variable_scope(), reuse=tf.compat.v1.AUTO_REUSE
            ):
                self._bias_r_u = tf.compat.v1.get_variable(
                    "bias_r_u",
                    shape=[2, self._num_units],
                    dtype=self._plain_dtype,
                    initializer=tf.compat.v1.ones_initializer(),
                )
                self._bias_c = tf.compat.v1.get_variable(
                    "bias_c",
                    shape=[1, self._num_units],
                    dtype=self._plain_dtype,
                    initializer=tf.compat.v1.zeros_initializer(),
                )
        biases = tf.concat([self._bias_r_u, self._bias_c], axis=0)
        if self._reset_after:
            biases = tf.stack([biases, biases], axis=1)
        return biases
