"""`ipu_tensorflow_addons.v1.layers.PopnnDynamicLSTM`: PopnnLSTM with per-sequence lengths."""

from __future__ import annotations

from openipu._src.addons.v1.layers.popnn_lstm import LSTMStateTuple, PopnnLSTM


class PopnnDynamicLSTM(PopnnLSTM):
    """A time-major Popnn LSTM whose batch entries stop at their `seq_len`.

    Past its length a sequence's outputs are zeros and its state is that of its
    last valid step (`tf.compat.v1.nn.dynamic_rnn(sequence_length=...)`'s convention).
    """

    def call(self, inputs, seq_len, initial_state=None, training=True):  # type: ignore[override]  # takes seq_len, as the original
        """`(output [T, B, num_units], LSTMStateTuple(c, h))`, or `output` without return_state."""
        del training
        inputs = self._as_inputs(inputs)
        c, h = self._initial_cell_and_hidden(inputs, initial_state)
        outputs, h, c = self._run(inputs, c, h, sequence_lengths=self._as_seq_len(seq_len))
        return self._result(outputs, LSTMStateTuple(c, h))
