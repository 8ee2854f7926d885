"""Recurrent layers: RNN, GRU, LSTM (ONNX layouts, gate orders and sequence lengths).

The time loop is ``tf.scan``, which runs eagerly, traces into a while loop and compiles with XLA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from openipu._src.popart.builder.ir_op_refusals import POPART_ACTIVATIONS, rnn_refusal
from openipu._src.popart.lowering.op import Op, RunContext
from openipu._src.popart.lowering.registry import register_op

# name -> (function of (x, alpha, beta), default alpha, default beta)
_ACTIVATIONS: dict[str, tuple[Callable, float | None, float | None]] = {
    "relu": (lambda x, a, b: tf.nn.relu(x), None, None),
    "tanh": (lambda x, a, b: tf.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: tf.sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: tf.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: tf.where(x > a, x, tf.zeros_like(x)), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * tf.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: tf.clip_by_value(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: tf.where(x > 0, x, a * tf.math.expm1(x)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + tf.abs(x)), None, None),
    "softplus": (lambda x, a, b: tf.math.softplus(x), None, None),
}


class RecurrentOp(Op):
    """Shared input handling; subclasses define the gates and the cell."""

    gate_count: int
    default_activations: tuple[str, ...]
    has_cell_state = False

    def setup(self) -> None:
        direction = self.attrs.direction
        if direction not in ("forward", "reverse", "bidirectional"):
            self.bad_attribute(
                "direction", f"must be forward, reverse or bidirectional, not {direction!r}"
            )
        self.directions = 2 if direction == "bidirectional" else 1
        names = self.attrs.get("activations") or list(self.default_activations) * self.directions
        alphas = list(self.attrs.get("activation_alpha") or [])
        betas = list(self.attrs.get("activation_beta") or [])
        self.activations = []
        for index, name in enumerate(names):
            key = name.lower()
            if key not in _ACTIVATIONS:
                self.bad_attribute("activations", f"names an unknown activation {name!r}")
            function, alpha, beta = _ACTIVATIONS[key]
            alpha = alphas[index] if index < len(alphas) else alpha
            beta = betas[index] if index < len(betas) else beta
            self.activations.append(
                lambda x, function=function, alpha=alpha, beta=beta: function(x, alpha, beta)
            )

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        inputs = list(inputs) + [None] * (8 - len(inputs))
        x, weight, recurrence, bias, sequence_lens, initial_h = inputs[:6]
        extra = inputs[6:]
        layout = self.attrs.get("layout") or 0
        if layout == 1:
            x = tf.transpose(x, [1, 0, 2])
            if initial_h is not None:
                initial_h = tf.transpose(initial_h, [1, 0, 2])
            if self.has_cell_state and extra[0] is not None:
                extra[0] = tf.transpose(extra[0], [1, 0, 2])
        hidden = self.attrs.hidden_size or recurrence.shape[-1]
        steps, batch = tf.shape(x)[0], tf.shape(x)[1]
        if sequence_lens is None:
            sequence_lens = tf.fill([batch], steps)
        sequence_lens = tf.cast(sequence_lens, tf.int32)
        outputs, final_states = [], []
        for direction in range(self.directions):
            reverse = self.attrs.direction == "reverse" or direction == 1
            states = self.initial_states(direction, x, hidden, initial_h, extra)
            sequence = x
            if reverse:
                sequence = tf.reverse_sequence(sequence, sequence_lens, seq_axis=0, batch_axis=1)
            weights = self.direction_weights(direction, weight, recurrence, bias, extra, hidden)
            activations = self.activations[
                direction * len(self.default_activations) : (direction + 1)
                * len(self.default_activations)
            ]
            ys, last = self.scan(sequence, sequence_lens, states, weights, activations)
            if reverse:
                ys = tf.reverse_sequence(ys, sequence_lens, seq_axis=0, batch_axis=1)
            outputs.append(ys)
            final_states.append(last)
        y = tf.stack(outputs, axis=1)  # [steps, directions, batch, hidden]
        finals = [
            tf.stack([states[i] for states in final_states]) for i in range(len(final_states[0]))
        ]
        if layout == 1:
            y = tf.transpose(y, [2, 0, 1, 3])
            finals = [tf.transpose(state, [1, 0, 2]) for state in finals]
        return (y, *finals)

    def initial_states(
        self, direction: int, x: tf.Tensor, hidden: int, initial_h: tf.Tensor | None, extra: list
    ) -> tuple[tf.Tensor, ...]:
        zeros = tf.zeros(tf.stack([tf.shape(x)[1], hidden]), dtype=x.dtype)
        h = initial_h[direction] if initial_h is not None else zeros
        if not self.has_cell_state:
            return (h,)
        initial_c = extra[0]
        return (h, initial_c[direction] if initial_c is not None else zeros)

    def direction_weights(
        self, direction: int, weight, recurrence, bias, extra, hidden
    ) -> dict[str, tf.Tensor]:
        count = self.gate_count
        w = weight[direction]
        r = recurrence[direction]
        if bias is not None:
            wb, rb = bias[direction][: count * hidden], bias[direction][count * hidden :]
        else:
            wb = rb = tf.zeros([count * hidden], dtype=w.dtype)
        return {"w": w, "r": r, "wb": wb, "rb": rb}

    def scan(
        self,
        sequence: tf.Tensor,
        sequence_lens: tf.Tensor,
        states: tuple[tf.Tensor, ...],
        weights: dict[str, tf.Tensor],
        activations: list[Callable],
    ) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
        # The input projection of every step at once, outside the loop.
        projected = tf.einsum("tbi,gi->tbg", sequence, weights["w"]) + weights["wb"]
        steps = tf.range(tf.shape(sequence)[0])

        def step(carry, inputs):
            states, _ = carry
            x_projected, t = inputs
            new_states = self.cell(x_projected, states, weights, activations)
            active = (t < sequence_lens)[:, tf.newaxis]
            kept = tuple(
                tf.where(active, new, old) for new, old in zip(new_states, states, strict=True)
            )
            output = tf.where(active, new_states[0], tf.zeros_like(new_states[0]))
            return kept, output

        initial = (states, tf.zeros_like(states[0]))
        stacked_states, ys = tf.scan(step, (projected, steps), initializer=initial)
        # tf.scan stacks every step's carry; the final states are the last ones.
        return ys, tuple(state[-1] for state in stacked_states)

    def cell(self, x_projected, states, weights, activations) -> tuple[tf.Tensor, ...]:
        raise NotImplementedError

    def clip(self, value: tf.Tensor) -> tf.Tensor:
        clip = self.attrs.get("clip")
        return tf.clip_by_value(value, -clip, clip) if clip is not None else value


@register_op("RNN", since=(1, 7, 14, 22))
class RNN(RecurrentOp):
    gate_count = 1
    default_activations = ("Tanh",)

    def setup(self) -> None:
        # PopART's RNN: one activation of its own, forward only, no activation parameters
        # or clip (willow/src/op/rnn.cpp, rnnOpCreator; operators_test/rnn_test.py).
        refusal = rnn_refusal(self.node, self.name)
        if refusal is not None:
            raise self.error(refusal)
        super().setup()

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        hidden = self.attrs.get("hidden_size")
        if hidden and hidden != inputs[2].shape[-1]:
            # willow/src/op/rnnbase.cpp, checkHiddenSize.
            raise self.error(
                f"hidden_size attribute passed to {self.name} ({hidden}) does not match "
                f"hidden size calculated from recurrenceWeights tensor ({inputs[2].shape[-1]})."
            )
        return super().run(context, inputs)

    def cell(self, x_projected, states, weights, activations):
        (h,) = states
        pre = x_projected + tf.matmul(h, weights["r"], transpose_b=True) + weights["rb"]
        return (activations[0](self.clip(pre)),)


@register_op("GRU", since=(1, 3, 7, 14, 22))
class GRU(RecurrentOp):
    gate_count = 3
    default_activations = ("Sigmoid", "Tanh")

    def cell(self, x_projected, states, weights, activations):
        (h,) = states
        f, g = activations
        r_weight, r_bias = weights["r"], weights["rb"]
        xz, xr, xh = tf.split(x_projected, 3, axis=-1)
        rz, rr, rh = tf.split(r_weight, 3, axis=0)
        bz, br, bh = tf.split(r_bias, 3)
        z = f(self.clip(xz + tf.matmul(h, rz, transpose_b=True) + bz))
        r = f(self.clip(xr + tf.matmul(h, rr, transpose_b=True) + br))
        if self.attrs.linear_before_reset:
            candidate = xh + r * (tf.matmul(h, rh, transpose_b=True) + bh)
        else:
            candidate = xh + tf.matmul(r * h, rh, transpose_b=True) + bh
        candidate = g(self.clip(candidate))
        return ((1 - z) * candidate + z * h,)


@register_op("LSTM", since=(1, 7, 14, 22))
class LSTM(RecurrentOp):
    gate_count = 4
    default_activations = ("Sigmoid", "Tanh", "Tanh")
    has_cell_state = True

    def setup(self) -> None:
        # PopART's LSTM takes only its own activation functions, one for the gates and one
        # for the output and forget gates alike (willow/src/op/lstm.cpp, readActivations;
        # willow/src/op/lstmutil.cpp, fromString; operators_test/lstm_test.py).
        names = list(self.attrs.get("activations") or [])
        for name in names[:2]:
            if name not in POPART_ACTIVATIONS:
                raise self.error(f"Activation type '{name}' is not supported")
        if len(names) >= 3 and names[1] != names[2]:
            raise self.error("LSTM activations must be the same for output and forget gates.")
        if len(names) > 3:
            raise self.error(
                f"Too many activations ({len(names)}) specified. Number of activations "
                "should be 1 or 3."
            )
        super().setup()

    def direction_weights(self, direction, weight, recurrence, bias, extra, hidden):
        weights = super().direction_weights(direction, weight, recurrence, bias, extra, hidden)
        peepholes = extra[1] if len(extra) > 1 else None
        if peepholes is not None:
            weights["p"] = peepholes[direction]
        return weights

    def cell(self, x_projected, states, weights, activations):
        h, c = states
        f, g, act_h = activations
        gates = x_projected + tf.matmul(h, weights["r"], transpose_b=True) + weights["rb"]
        xi, xo, xf, xc = tf.split(gates, 4, axis=-1)
        peepholes = weights.get("p")
        if peepholes is not None:
            pi, po, pf = tf.split(peepholes, 3)
            xi, xf = xi + pi * c, xf + pf * c
        i = f(self.clip(xi))
        forget = 1 - i if self.attrs.input_forget else f(self.clip(xf))
        candidate = g(self.clip(xc))
        new_c = forget * c + i * candidate
        if peepholes is not None:
            xo = xo + po * new_c
        o = f(self.clip(xo))
        return o * act_h(new_c), new_c
