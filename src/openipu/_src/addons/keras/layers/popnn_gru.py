"""The Keras Popnn GRU layer (`ipu_tensorflow_addons.keras.layers.PopnnGRU`, alias `GRU`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers.popnn_recurrent import PopnnRecurrent
from openipu._src.addons.recurrent import recurrence


@tf_keras.utils.register_keras_serializable(package="openipu")
class PopnnGRU(PopnnRecurrent):
    """Gated Recurrent Unit layer (Cho et al. 2014) in Popnn's form.

    Its weights are those of `tf_keras.layers.GRU` with the same `reset_after`
    (`kernel [F, 3u]`, `recurrent_kernel [u, 3u]`, gates z, r, h; `biases
    [2, 3u]` (input row, recurrent row) when `reset_after`, else `[3u]`), so
    `set_weights(keras_gru.get_weights())` gives the stock layer's results.
    `reset_after=True` applies the reset gate after the recurrent matrix
    product, False before it. Dropout applies to the inputs only, with one
    mask per sequence shared by all time steps.

    Choices where the sources disagree (CONFLICT in the fact sheet):
    - `reset_after` defaults to True, as the parameter text and the original's
      source say (the class text claims the "reset before" variant is the default).
    - `activation=None` / `recurrent_activation=None` mean no activation
      (`a(x) = x`), as the documentation says; the original raised a TypeError.
    - `seed` seeds the kernel and recurrent initializers that have no seed of
      their own (string names included), as the documentation says.
    - The available memory proportions are kept in the config (the original
      dropped them).
    """

    num_gates = 3
    num_states = 1

    def __init__(
        self,
        units: int,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias: bool = True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
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
        reset_after: bool = True,
        seed=None,
        partials_dtype=tf.float32,
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
        if not isinstance(reset_after, bool):
            # The original hands it to its Popnn op's bool attribute, which refuses anything
            # else (ipu_tensorflow_addons/keras/layers/rnn.py; TensorFlow's make_bool).
            raise TypeError(f"Expected bool for argument 'reset_after' not {reset_after!r}.")
        self.reset_after = reset_after

    def state_shape(self, batch_size: int):
        """Shape of the state: `[batch_size, units]`."""
        return [batch_size, self.units]

    def _bias_shape(self) -> tuple[int, ...]:
        width = self.num_gates * self.units
        return (2, width) if self.reset_after else (width,)

    def _run(self, inputs: tf.Tensor, states: list[tf.Tensor]) -> tuple[tf.Tensor, list]:
        activation, recurrent_activation = self._activations()
        dtype = inputs.dtype
        biases = tf.cast(self.biases, dtype)
        if self.reset_after:
            input_bias, recurrent_bias = biases[0], biases[1]
        else:
            input_bias, recurrent_bias = biases, None
        outputs, h = recurrence.gru(
            inputs,
            tf.cast(self.kernel, dtype),
            tf.cast(self.recurrent_kernel, dtype),
            input_bias,
            recurrent_bias,
            states[0],
            activation,
            recurrent_activation,
            self.reset_after,
        )
        return outputs, [h]

    def get_config(self) -> dict:
        return {**super().get_config(), "reset_after": self.reset_after}
