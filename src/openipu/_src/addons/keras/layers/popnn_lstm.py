"""The Keras Popnn LSTM layer (`ipu_tensorflow_addons.keras.layers.PopnnLSTM`, alias `LSTM`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers.popnn_recurrent import PopnnRecurrent
from openipu._src.addons.recurrent import recurrence


@tf_keras.utils.register_keras_serializable(package="openipu")
class PopnnLSTM(PopnnRecurrent):
    """Long Short-Term Memory layer (Hochreiter and Schmidhuber 1997) in Popnn's form.

    Its weights are those of `tf_keras.layers.LSTM` (`kernel [F, 4u]`,
    `recurrent_kernel [u, 4u]`, `biases [4u]`, gates i, f, c, o), so
    `set_weights(keras_lstm.get_weights())` gives the stock layer's results.
    `initial_state` is (h, c), Keras's order. Dropout applies to the inputs
    only, with one mask per sequence shared by all time steps.

    Choices where the sources disagree (CONFLICT in the fact sheet):
    - `activation=None` / `recurrent_activation=None` mean no activation
      (`a(x) = x`), as the documentation says; the original raised a TypeError.
    - `unit_forget_bias=True` sets the forget-gate biases to one and initialises
      the others with `bias_initializer`, as the original's source and stock
      Keras do; the documentation's "also forces zeros" is not applied.
    - `seed` seeds the kernel and recurrent initializers that have no seed of
      their own (string names included), as the documentation says.
    - The available memory proportions are kept in the config (the original
      dropped them).
    """

    num_gates = 4
    num_states = 2

    def __init__(
        self,
        units: int,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias: bool = True,
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout: float = 0.0,
        dropout_seed=None,
        recurrent_dropout: float = 0.0,
        implementation: int = 2,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        stateful: bool = False,
        unroll: bool = False,
        partials_dtype=tf.float32,
        seed=None,
        time_major: bool = False,
        available_memory_proportion_fwd=None,
        available_memory_proportion_bwd=None,
        **kwargs,
    ) -> None:
        super().__init__(
            units,
            activation=activation,
            recurrent_activation=recurrent_activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            unsupported={
                "kernel_regularizer": (kernel_regularizer, None),
                "recurrent_regularizer": (recurrent_regularizer, None),
                "bias_regularizer": (bias_regularizer, None),
                "activity_regularizer": (activity_regularizer, None),
                "kernel_constraint": (kernel_constraint, None),
                "recurrent_constraint": (recurrent_constraint, None),
                "bias_constraint": (bias_constraint, None),
            },
            dropout=dropout,
            dropout_seed=dropout_seed,
            recurrent_dropout=recurrent_dropout,
            implementation=implementation,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            seed=seed,
            partials_dtype=partials_dtype,
            time_major=time_major,
            available_memory_proportion_fwd=available_memory_proportion_fwd,
            available_memory_proportion_bwd=available_memory_proportion_bwd,
            **kwargs,
        )
        # Taken by truth value, as the original (ipu_tensorflow_addons/keras/layers/rnn.py).
        self.unit_forget_bias = unit_forget_bias

    def state_shape(self, batch_size: int):
        """Shapes of the two states (h, c): `([batch_size, units], [batch_size, units])`."""
        return ([batch_size, self.units], [batch_size, self.units])

    def _bias_shape(self) -> tuple[int, ...]:
        return (self.num_gates * self.units,)

    def _bias_initializer(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        units, bias_initializer = self.units, self.bias_initializer

        def forget_gate_ones(shape, dtype=None, **kwargs):
            return tf.concat(
                [
                    bias_initializer((units,), dtype=dtype, **kwargs),
                    tf.ones((units,), dtype=dtype),
                    bias_initializer((2 * units,), dtype=dtype, **kwargs),
                ],
                axis=0,
            )

        return forget_gate_ones

    def _run(self, inputs: tf.Tensor, states: list[tf.Tensor]) -> tuple[tf.Tensor, list]:
        activation, recurrent_activation = self._activations()
        dtype = inputs.dtype
        outputs, h, c = recurrence.lstm(
            inputs,
            tf.cast(self.kernel, dtype),
            tf.cast(self.recurrent_kernel, dtype),
            tf.cast(self.biases, dtype),
            states[0],
            states[1],
            activation,
            recurrent_activation,
        )
        return outputs, [h, c]

    def get_config(self) -> dict:
        return {**super().get_config(), "unit_forget_bias": self.unit_forget_bias}
