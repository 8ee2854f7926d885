"""`ipu_tensorflow_addons.v1.layers.PopnnGRU`: a time-major TF1 GRU layer in Popnn's layout."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.addons.recurrent import recurrence
from openipu._src.addons.v1.layers.popnn_rnn import PopnnRNN


class PopnnGRU(PopnnRNN):
    """XLA compatible, time-major Popnn implementation of a GRU layer.

    `kernel [input_size + num_units, 3 * num_units]` holds the gates z (update),
    r (reset), h (candidate), Keras's order (`tf.compat.v1.nn.rnn_cell.GRUCell`
    keeps r, z in its gates kernel and the candidate in a kernel of its own).
    `biases` is `[3, num_units]`, or `[3, 2, num_units]` (input bias, recurrent
    bias) with `reset_after`. `reset_after=False` (the default) is
    `GRUCell`'s convention: the reset gate applies before the recurrent
    matrix product.
    """

    num_gates = 3

    def __init__(self, *args, reset_after: bool = False, **kwargs) -> None:
        """The arguments of the other Popnn layers (`PopnnRNN`), and `reset_after`."""
        super().__init__(*args, **kwargs)
        self._reset_after = bool(reset_after)

    @property
    def canonical_bias_shapes(self) -> list[int]:
        """`[3, num_units]`, or `[3, 2, num_units]` with `reset_after`."""
        if self._reset_after:
            return [self.num_gates, 2, self._num_units]
        return [self.num_gates, self._num_units]

    def call(self, inputs, initial_state=None, training=True):
        """`(output [T, B, num_units], state [B, num_units])`, or `output` without return_state."""
        del training
        inputs = self._as_inputs(inputs)
        outputs, state = self._run(inputs, self.biases, initial_state)
        return self._result(outputs, state)

    def _run(self, inputs: tf.Tensor, biases, initial_state, sequence_lengths=None, attention=None):
        """Outputs and final state of the GRU over time-major `inputs` with Popnn `biases`."""
        dtype = self._compute_dtype()
        if initial_state is None:
            state = tf.zeros(self.state_shape(tf.shape(inputs)[1]), dtype)
        else:
            state = self._as_state(initial_state, "initial_state")
        kernel, recurrent_kernel = self._split_kernel()
        activation, recurrent_activation = self._activations()
        biases = tf.cast(biases, dtype)
        if self._reset_after:
            input_bias = tf.reshape(biases[:, 0], [-1])
            recurrent_bias = tf.reshape(biases[:, 1], [-1])
        else:
            input_bias, recurrent_bias = tf.reshape(biases, [-1]), None
        return recurrence.gru(
            tf.cast(inputs, dtype),
            kernel,
            recurrent_kernel,
            input_bias,
            recurrent_bias,
            state,
            activation,
            recurrent_activation,
            self._reset_after,
            sequence_lengths=sequence_lengths,
            attention=None if attention is None else tf.cast(attention, dtype),
        )
