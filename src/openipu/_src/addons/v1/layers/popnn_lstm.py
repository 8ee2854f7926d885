"""`ipu_tensorflow_addons.v1.layers.PopnnLSTM`: a time-major TF1 LSTM layer in Popnn's layout."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.addons.recurrent import recurrence
from openipu._src.addons.v1.layers.popnn_rnn import PopnnRNN

LSTMStateTuple = tf.compat.v1.nn.rnn_cell.LSTMStateTuple


class PopnnLSTM(PopnnRNN):
    """XLA compatible, time-major Popnn implementation of an LSTM layer.

    `kernel [input_size + num_units, 4 * num_units]` holds the gates i, f, c, o
    (Keras's order; `tf.compat.v1.nn.rnn_cell.LSTMCell` orders them i, c, f, o),
    `biases [4, num_units]`. States are `LSTMStateTuple(c, h)`.
    """

    num_gates = 4

    def call(self, inputs, initial_state=None, training=True):
        """`(output [T, B, num_units], LSTMStateTuple(c, h))`, or `output` without return_state.

        `training` only selects Popnn's inference program on the chip; the numbers are
        the same.
        """
        del training
        inputs = self._as_inputs(inputs)
        c, h = self._initial_cell_and_hidden(inputs, initial_state)
        outputs, h, c = self._run(inputs, c, h, sequence_lengths=None)
        return self._result(outputs, LSTMStateTuple(c, h))

    def state_shape(self, batch_size):
        """Shapes of the two states: `([batch_size, num_units], [batch_size, num_units])`."""
        return ([batch_size, self._num_units], [batch_size, self._num_units])

    def _initial_cell_and_hidden(self, inputs: tf.Tensor, initial_state):
        if initial_state is not None and not isinstance(initial_state, LSTMStateTuple):
            # The original's check and message (v1/layers/rnn_ops.py).
            raise ValueError(
                f"Invalid initial_state type: `{type(initial_state)}`, expecting `LSTMStateTuple`."
            )
        if initial_state is None:
            zeros = tf.zeros(self.state_shape(tf.shape(inputs)[1])[0], self._compute_dtype())
            return zeros, zeros
        c, h = initial_state
        return self._as_state(c, "initial_state.c"), self._as_state(h, "initial_state.h")

    def _run(self, inputs: tf.Tensor, c, h, sequence_lengths):
        kernel, recurrent_kernel = self._split_kernel()
        activation, recurrent_activation = self._activations()
        bias = tf.reshape(tf.cast(self.biases, self._compute_dtype()), [-1])
        return recurrence.lstm(
            tf.cast(inputs, self._compute_dtype()),
            kernel,
            recurrent_kernel,
            bias,
            h,
            c,
            activation,
            recurrent_activation,
            sequence_lengths=sequence_lengths,
        )
