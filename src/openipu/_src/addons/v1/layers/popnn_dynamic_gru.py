"""`ipu_tensorflow_addons.v1.layers.PopnnDynamicGRU`: PopnnGRU with per-sequence lengths."""

from __future__ import annotations

from openipu._src.addons.v1.layers.popnn_gru import PopnnGRU


class PopnnDynamicGRU(PopnnGRU):
    """A time-major Popnn GRU whose batch entries stop at their `seq_len`.

    Past its length a sequence's outputs are zeros and its state is that of its
    last valid step (`tf.compat.v1.nn.dynamic_rnn(sequence_length=...)`'s convention).
    With `time_major=False` the inputs are `[B, T, F]`; the output stays
    time-major, as in the original.
    """

    def call(self, inputs, seq_len, initial_state=None, training=True, time_major=True):  # type: ignore[override]  # takes seq_len, as the original
        """`(output [T, B, num_units], state [B, num_units])`, or `output` without return_state."""
        del training
        inputs = self._as_inputs(inputs, time_major)
        # The original widened `biases` to [3, 2, u] when reset_after, which clashed with
        # the [3, 2, u] variable it had built; the variable is used as it is here.
        outputs, state = self._run(
            inputs, self.biases, initial_state, sequence_lengths=self._as_seq_len(seq_len)
        )
        return self._result(outputs, state)
