"""LSTM, GRU and AUGRU over a time-major sequence, in Popnn's weight layout.

Weights are those of `tf.keras.layers.LSTM`/`GRU`: `kernel [F, G*u]`,
`recurrent_kernel [u, G*u]`, gate-major columns (LSTM gates i, f, c, o; GRU
gates z, r, h). The input projection of all time steps is one matrix
product before the loop; the loop (a `tf.while_loop`, which XLA compiles and
TensorFlow differentiates) only does the recurrent part.

With `sequence_lengths`, a batch entry stops at its length: its state keeps
the value of its last valid step and its outputs after that are zeros
(`tf.compat.v1.nn.dynamic_rnn`'s convention).
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

Activation = Callable[[tf.Tensor], tf.Tensor]


def lstm(
    inputs: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    bias: tf.Tensor,
    initial_h: tf.Tensor,
    initial_c: tf.Tensor,
    activation: Activation,
    recurrent_activation: Activation,
    sequence_lengths: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Outputs `[T, B, u]` and the final `h`, `c` of an LSTM over `inputs [T, B, F]`."""
    projected = _project(inputs, kernel, bias)

    def step(states, projected_t):
        h, c = states
        gates = projected_t + tf.matmul(h, recurrent_kernel)
        i, f, g, o = tf.split(gates, 4, axis=-1)
        c = recurrent_activation(f) * c + recurrent_activation(i) * activation(g)
        h = recurrent_activation(o) * activation(c)
        return (h, c), h

    outputs, (h, c) = _recur(step, [projected], (initial_h, initial_c), sequence_lengths)
    return outputs, h, c


def gru(
    inputs: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    input_bias: tf.Tensor,
    recurrent_bias: tf.Tensor | None,
    initial_h: tf.Tensor,
    activation: Activation,
    recurrent_activation: Activation,
    reset_after: bool,
    sequence_lengths: tf.Tensor | None = None,
    attention: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Outputs `[T, B, u]` and the final state of a GRU over `inputs [T, B, F]`.

    `reset_after` applies the reset gate after the recurrent matrix product
    (`hh = act(x W_h + b_h + r * (h U_h + rb_h))`, with a recurrent bias), otherwise
    before it (`hh = act(x W_h + (r * h) U_h + b_h)`). `attention [T, B]` makes it an
    AUGRU: the update gate becomes `(1 - a_t) * z`, so `a = 0` is a plain GRU.
    """
    projected = _project(inputs, kernel, input_bias)
    units = recurrent_kernel.shape[0]
    sequences = [projected] if attention is None else [projected, attention]

    def step(states, projected_t, attention_t=None):
        (h,) = states
        x_z, x_r, x_h = tf.split(projected_t, 3, axis=-1)
        if reset_after:
            recurrent = tf.matmul(h, recurrent_kernel)
            if recurrent_bias is not None:
                recurrent += recurrent_bias
            h_z, h_r, h_h = tf.split(recurrent, 3, axis=-1)
            z = recurrent_activation(x_z + h_z)
            r = recurrent_activation(x_r + h_r)
            candidate = activation(x_h + r * h_h)
        else:
            h_zr = tf.matmul(h, recurrent_kernel[:, : 2 * units])
            h_z, h_r = tf.split(h_zr, 2, axis=-1)
            z = recurrent_activation(x_z + h_z)
            r = recurrent_activation(x_r + h_r)
            candidate = activation(x_h + tf.matmul(r * h, recurrent_kernel[:, 2 * units :]))
        if attention_t is not None:
            z = (1 - attention_t[:, None]) * z
        h = z * h + (1 - z) * candidate
        return (h,), h

    outputs, (h,) = _recur(step, sequences, (initial_h,), sequence_lengths)
    return outputs, h


def _project(inputs: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor | None) -> tf.Tensor:
    """`inputs @ kernel + bias` for every time step at once: `[T, B, G*u]`."""
    projected = tf.einsum("tbf,fg->tbg", inputs, kernel)
    return projected if bias is None else projected + bias


def _recur(step, sequences: list[tf.Tensor], initial_states: tuple, sequence_lengths):
    """Runs `step(states, *elements_t) -> (states, output)` over the time axis of `sequences`."""
    time_steps = sequences[0].shape[0]
    if time_steps is None:
        time_steps = tf.shape(sequences[0])[0]
    readers = [
        tf.TensorArray(s.dtype, size=time_steps, element_shape=s.shape[1:]).unstack(s)
        for s in sequences
    ]
    first = initial_states[0]
    outputs = tf.TensorArray(first.dtype, size=time_steps, element_shape=first.shape)
    if sequence_lengths is not None:
        sequence_lengths = tf.cast(tf.reshape(sequence_lengths, [-1, 1]), tf.int32)

    def body(t, states, outputs):
        new_states, output = step(states, *[reader.read(t) for reader in readers])
        if sequence_lengths is not None:
            valid = t < sequence_lengths
            new_states = tuple(
                tf.where(valid, new, old) for new, old in zip(new_states, states, strict=True)
            )
            output = tf.where(valid, output, tf.zeros_like(output))
        new_states = tuple(
            tf.ensure_shape(new, old.shape) for new, old in zip(new_states, states, strict=True)
        )
        return t + 1, new_states, outputs.write(t, output)

    _, states, outputs = tf.while_loop(
        lambda t, *_: t < time_steps,
        body,
        (tf.constant(0), tuple(initial_states), outputs),
        maximum_iterations=time_steps,
    )
    return outputs.stack(), states
