"""What the Keras Popnn recurrent layers (PopnnLSTM, PopnnGRU) have in common.

Arguments Popnn does not support (regularizers, constraints, recurrent
dropout, go_backwards, unroll, use_bias=False, ...) raise a ValueError naming
them; the hardware knobs (`partials_dtype`, available memory proportions) are
checked and kept in the config. Dropout applies to the inputs, one mask per
sequence shared by all time steps, in training only: `training=None` follows
Keras's learning phase (the original treated every non-bool `training`,
None included, as training).
"""

from __future__ import annotations

import numbers

import tensorflow as tf
import tf_keras

from openipu._src.addons.recurrent import activations, options, poplibs_options
from openipu._src.ops import rand_ops


class PopnnRecurrent(tf_keras.layers.Layer):
    """Base of the Keras Popnn recurrent layers; subclasses define the cell."""

    #: Gates per unit (4 for an LSTM, 3 for a GRU).
    num_gates: int
    #: Number of state tensors (2 for an LSTM, 1 for a GRU).
    num_states: int

    def __init__(
        self,
        units: int,
        *,
        activation,
        recurrent_activation,
        use_bias: bool,
        kernel_initializer,
        recurrent_initializer,
        bias_initializer,
        unsupported: dict,
        dropout: float,
        dropout_seed,
        recurrent_dropout: float,
        implementation: int,
        return_sequences: bool,
        return_state: bool,
        go_backwards: bool,
        stateful: bool,
        unroll: bool,
        seed,
        partials_dtype,
        time_major: bool,
        available_memory_proportion_fwd,
        available_memory_proportion_bwd,
        **kwargs,
    ) -> None:
        owner = type(self).__name__
        _reject_unsupported(
            owner,
            {
                **unsupported,
                "use_bias": (use_bias, True),
                "recurrent_dropout": (recurrent_dropout, 0.0),
                "go_backwards": (go_backwards, False),
                "unroll": (unroll, False),
            },
        )
        # The original maps 2 to 1, then refuses anything else that is not 1.
        if implementation not in (1, 2):
            raise ValueError(f"{owner}: implementation must be 1 or 2, got {implementation!r}")
        self.options = poplibs_options.as_dict(owner, "options", kwargs.pop("options", None))
        self.options_bwd = poplibs_options.as_dict(
            owner, "options_bwd", kwargs.pop("options_bwd", None)
        )
        super().__init__(**kwargs)
        for label, dtype in (("dtype", self.dtype), ("compute dtype", self.compute_dtype)):
            options.checked_float_dtype(owner, f"the layer's {label}", dtype)
        self.units = options.checked_units(owner, "units", units)
        self.activation = activations.checked_name(
            owner, "activation", activation, activations.ACTIVATION_NAMES
        )
        self.recurrent_activation = activations.checked_name(
            owner,
            "recurrent_activation",
            recurrent_activation,
            activations.RECURRENT_ACTIVATION_NAMES,
        )
        self.kernel_initializer = tf_keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = tf_keras.initializers.get(recurrent_initializer)
        self.bias_initializer = tf_keras.initializers.get(bias_initializer)
        self.dropout = _checked_rate(owner, dropout)
        # The original hands dropout_seed to rand_ops.dropout only when it drops out (in
        # training, dropout > 0), which checks it then (ipu_tensorflow_addons/keras/layers/rnn.py).
        self.dropout_seed = dropout_seed
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.stateful = bool(stateful)
        self.seed = _checked_seed(owner, seed)
        self.partials_dtype = options.checked_partials_dtype(owner, partials_dtype)
        self.time_major = bool(time_major)
        self.available_memory_proportion_fwd, self.available_memory_proportion_bwd = (
            options.checked_memory_proportions(
                owner, available_memory_proportion_fwd, available_memory_proportion_bwd
            )
        )
        self.input_spec = tf_keras.layers.InputSpec(ndim=3)
        self._state_holder = _StateHolder()

    # -- subclasses ------------------------------------------------------------------------------

    def _bias_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def _bias_initializer(self):
        return self.bias_initializer

    def _run(self, inputs: tf.Tensor, states: list[tf.Tensor]) -> tuple[tf.Tensor, list]:
        """Outputs `[T, B, u]` and final states of the cell over time-major `inputs`."""
        raise NotImplementedError

    def _initial_states(self, initial_state, batch_size, dtype) -> list[tf.Tensor]:
        """The `initial_state` argument as a list of `num_states` tensors (zeros if None).

        An LSTM's two states come in Keras's order, (h, c); a GRU's one state may come
        alone or in a list.
        """
        owner = type(self).__name__
        if initial_state is None:
            return [tf.zeros([batch_size, self.units], dtype) for _ in range(self.num_states)]
        if tf.is_tensor(initial_state) or not isinstance(initial_state, (list, tuple)):
            initial_state = [initial_state]
        if len(initial_state) != self.num_states:
            raise ValueError(
                f"{owner}: initial_state must be {self.num_states} tensor(s) of shape "
                f"[batch_size, {self.units}], got {len(initial_state)}"
            )
        states = []
        for state in initial_state:
            state = tf.convert_to_tensor(state)
            if state.shape.rank is not None and (
                state.shape.rank != 2 or state.shape[-1] not in (None, self.units)
            ):
                raise ValueError(
                    f"{owner}: each initial state must have shape [batch_size, {self.units}], "
                    f"got {state.shape}"
                )
            states.append(tf.cast(state, dtype))
        return states

    # -- Keras -----------------------------------------------------------------------------------

    def state_shape(self, batch_size: int):
        """Shape of one state tensor: `[batch_size, units]`."""
        return [batch_size, self.units]

    def build(self, input_shape) -> None:
        owner = type(self).__name__
        for cell_options in (self.options, self.options_bwd):
            poplibs_options.check_when_built(cell_options)
        input_shape = tf.TensorShape(input_shape)
        if input_shape.rank != 3:
            raise ValueError(
                f"{owner}: the input must have rank 3 ([batch, time, features], or "
                f"[time, batch, features] when time_major), got shape {input_shape}"
            )
        features = input_shape[-1]
        if features is None:
            raise ValueError(f"{owner}: the last dimension of the input must be known")
        width = self.num_gates * self.units
        self.kernel = self.add_weight(
            "kernel", shape=(features, width), initializer=self._seeded(self.kernel_initializer)
        )
        self.recurrent_kernel = self.add_weight(
            "recurrent_kernel",
            shape=(self.units, width),
            initializer=self._seeded(self.recurrent_initializer),
        )
        self.biases = self.add_weight(
            "biases", shape=self._bias_shape(), initializer=self._bias_initializer()
        )
        if self.stateful:
            batch_size = input_shape[1 if self.time_major else 0]
            if batch_size is None:
                raise ValueError(
                    f"{owner}: a stateful layer needs a known batch size, got input shape "
                    f"{input_shape} (give the Input a batch_size)"
                )
            # Like stock Keras, the states are not weights, so that `set_weights` takes
            # exactly the weights of a stock Keras layer.
            self._state_holder.variables = [
                tf.Variable(
                    tf.zeros((batch_size, self.units), self.variable_dtype),
                    trainable=False,
                    name=f"{self.name}_state_{index}",
                )
                for index in range(self.num_states)
            ]
        super().build(input_shape)

    def call(self, inputs, mask=None, training=None, initial_state=None):
        owner = type(self).__name__
        if mask is not None:
            raise NotImplementedError(f"{owner}: masking is not supported (got a mask)")
        inputs = tf.convert_to_tensor(inputs)
        if inputs.shape.rank != 3:
            raise ValueError(f"{owner}: the input must have rank 3, got shape {inputs.shape}")
        time_major = inputs if self.time_major else tf.transpose(inputs, [1, 0, 2])
        time_major = self._input_dropout(time_major, training)
        dtype = options.compute_dtype(inputs.dtype, self.partials_dtype)
        batch_size = tf.shape(time_major)[1]
        if initial_state is None and self.stateful:
            states = [tf.cast(v, dtype) for v in self._state_holder.variables]
        else:
            states = [
                tf.cast(s, dtype) for s in self._initial_states(initial_state, batch_size, dtype)
            ]
        outputs, final_states = self._run(tf.cast(time_major, dtype), states)
        if self.stateful:
            for variable, value in zip(self._state_holder.variables, final_states, strict=True):
                variable.assign(tf.cast(value, variable.dtype))
        if self.return_sequences:
            output = outputs if self.time_major else tf.transpose(outputs, [1, 0, 2])
        else:
            output = outputs[-1]
        output = tf.cast(output, inputs.dtype)
        if self.return_state:
            return [output, *(tf.cast(s, inputs.dtype) for s in final_states)]
        return output

    @property
    def states(self) -> list[tf.Variable]:
        """The state variables of a stateful layer (empty otherwise)."""
        return list(self._state_holder.variables)

    def reset_states(self) -> None:
        """Zeroes the state of a stateful layer."""
        for variable in self._state_holder.variables:
            variable.assign(tf.zeros_like(variable))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "activation": self.activation,
            "recurrent_activation": self.recurrent_activation,
            "kernel_initializer": tf_keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": tf_keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": tf_keras.initializers.serialize(self.bias_initializer),
            "dropout": self.dropout,
            "dropout_seed": _seed_config(self.dropout_seed),
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "stateful": self.stateful,
            "seed": self.seed,
            "partials_dtype": options.dtype_name(self.partials_dtype),
            "time_major": self.time_major,
            "available_memory_proportion_fwd": self.available_memory_proportion_fwd,
            "available_memory_proportion_bwd": self.available_memory_proportion_bwd,
            "options": dict(self.options),
            "options_bwd": dict(self.options_bwd),
        }

    # -- helpers ---------------------------------------------------------------------------------

    def _activations(self):
        return (
            activations.function(self.activation),
            activations.function(self.recurrent_activation),
        )

    def _seeded(self, initializer):
        """`initializer`, seeded with the layer's `seed` unless it has a seed of its own."""
        if self.seed is None or isinstance(self.seed, bool) or not isinstance(self.seed, int):
            return initializer
        config = initializer.get_config()
        if config.get("seed", 0) is not None:
            return initializer
        return type(initializer).from_config({**config, "seed": self.seed})

    def _input_dropout(self, inputs: tf.Tensor, training) -> tf.Tensor:
        if not self.dropout > 0.0:  # the original's test: a negative rate drops nothing
            return inputs
        if training is None:
            training = tf_keras.backend.learning_phase()

        def dropped():
            # One mask per sequence, shared by every time step.
            return rand_ops.dropout(
                inputs, rate=self.dropout, noise_shape=[1, None, None], seed=self.dropout_seed
            )

        return tf.__internal__.smart_cond.smart_cond(training, dropped, lambda: inputs)


class _StateHolder:
    """Keeps the state variables of a stateful layer out of Keras's weight tracking."""

    def __init__(self) -> None:
        self.variables: list[tf.Variable] = []


def _reject_unsupported(owner: str, arguments: dict) -> None:
    """`arguments` maps a name to (given value, the only supported value). As the original
    (ipu_tensorflow_addons/keras/layers/rnn.py), flags and regularizers/constraints are
    judged by truth value (`unroll=None` is no unroll) and recurrent_dropout by `!= 0`."""
    for name, (value, supported) in arguments.items():
        if supported is True:
            refused = not value
        elif supported is False or supported is None:
            refused = bool(value)
        else:
            refused = value != supported
        if refused:
            raise ValueError(
                f"{owner}: {name}={value!r} is not supported on the IPU (only {supported!r})"
            )


def _checked_rate(owner: str, rate) -> float:
    # The original checks the range only when it drops out, in training (rand_ops.dropout's
    # ValueError, ipu_tensorflow_addons/keras/layers/rnn.py): a layer made with dropout=1.0
    # still predicts. A rate that is no number fails its `dropout > 0.` with a TypeError.
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise TypeError(f"{owner}: dropout must be a float in [0, 1), got {rate!r}")
    return float(rate)


def _checked_seed(owner: str, seed):
    # The original keeps `seed` for initializers it makes itself (none, with the default
    # initializers), so any value is taken; only an int seeds the initializers here.
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return int(seed)
    return seed


def _seed_config(seed):
    if seed is None:
        return None
    value = tf.get_static_value(seed) if tf.is_tensor(seed) else seed
    if hasattr(value, "tolist"):
        return value.tolist()
    return list(value) if isinstance(value, tuple) else value
