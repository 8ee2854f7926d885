"""What the TF1 Popnn recurrent layers (`ipu_tensorflow_addons.v1.layers`) have in common.

The layers are time-major `tf.compat.v1.layers.Layer`s, as the original's
`ipu_tensorflow_addons/v1/layers/rnn_ops.py` (`_PopnnRNN`). Their variables are
in Popnn's canonical layout:

- `kernel [input_size + num_units, num_gates * num_units]`: the input kernel
  stacked over the recurrent kernel, gate-major columns in Keras's gate order
  (LSTM i, f, c, o; GRU z, r, h);
- `biases [num_gates, num_units]` (a GRU with `reset_after`: `[3, 2, num_units]`,
  the input bias then the recurrent bias of each gate).

The recurrence itself is `openipu._src.addons.recurrent.recurrence`, shared
with the Keras layers. `partials_dtype`, the available memory proportions and
the PopLibs `options` only steer how Popnn computes on the chip: they are
checked and kept.
"""

from __future__ import annotations

import logging
import numbers

import tensorflow as tf

from openipu._src.addons.recurrent import activations, poplibs_options
from openipu._src.addons.recurrent import options as recurrent_options
from openipu._src.int_like import as_attr_int, plain_int

_AMP_OPTION = "availableMemoryProportion"


class PopnnRNN(tf.compat.v1.layers.Layer):
    """Base of the TF1 Popnn layers; subclasses define the gates and `call`."""

    #: Gates per unit (4 for an LSTM, 3 for a GRU).
    num_gates: int

    def __init__(
        self,
        num_units: int,
        dtype=tf.float32,
        partials_dtype=tf.float32,
        seed: int | None = None,
        weights_initializer=None,
        bias_initializer=None,
        activation="tanh",
        recurrent_activation="sigmoid",
        return_state: bool = True,
        name: str | None = None,
        available_memory_proportion_fwd: float | None = None,
        available_memory_proportion_bwd: float | None = None,
        options: dict | None = None,
        options_bwd: dict | None = None,
    ) -> None:
        owner = type(self).__name__
        # The original: "Only support float16, float32" (a ValueError).
        self._plain_dtype = recurrent_options.checked_float_dtype(owner, "dtype", dtype)
        super().__init__(dtype=self._plain_dtype, name=name)
        self._partials_dtype = recurrent_options.checked_partials_dtype(owner, partials_dtype)
        self._num_units = _checked_num_units(owner, num_units)
        self._num_layers = 1
        self._seed = seed
        self._weights_initializer = weights_initializer
        self._bias_initializer = bias_initializer
        self._activation = _activation_name(
            owner, "activation", activation, activations.ACTIVATION_NAMES
        )
        self._recurrent_activation = _activation_name(
            owner,
            "recurrent_activation",
            recurrent_activation,
            activations.RECURRENT_ACTIVATION_NAMES,
        )
        self._return_state = return_state
        self._input_size: int | None = None
        self._available_memory_proportion_fwd, self._available_memory_proportion_bwd = (
            recurrent_options.checked_memory_proportions(
                owner, available_memory_proportion_fwd, available_memory_proportion_bwd
            )
        )
        self._options = _checked_options(owner, "options", options)
        self._options_bwd = _checked_options(owner, "options_bwd", options_bwd)
        self._forward_options = _merged_options(
            self._options, self._available_memory_proportion_fwd, "fwd"
        )
        self._backward_options = _merged_options(
            self._options_bwd, self._available_memory_proportion_bwd, "bwd"
        )

    # -- the original's properties ---------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        return self._num_layers

    @property
    def num_units(self) -> int:
        return self._num_units

    @property
    def input_size(self) -> int:
        if not self._input_size:
            raise ValueError("'input_size' is unknown since layer has not been built.")
        return self._input_size

    @property
    def saveable(self) -> bool:
        return False

    @property
    def canonical_weight_shape(self) -> list[int]:
        """Shape of the Popnn kernel: `[input_size + num_units, num_gates * num_units]`."""
        if not self._input_size:
            raise RuntimeError(
                f"{type(self).__name__}.canonical_weight_shape invoked before input shape is known"
            )
        return [self._input_size + self._num_units, self.num_gates * self._num_units]

    @property
    def canonical_bias_shapes(self) -> list[int]:
        """Shape of the Popnn biases: `[num_gates, num_units]`."""
        return [self.num_gates, self._num_units]

    @property
    def forward_options(self) -> dict:
        """The PopLibs options of the forward pass, the memory proportion merged in."""
        return dict(self._forward_options)

    @property
    def backward_options(self) -> dict:
        """The PopLibs options of the backward pass, the memory proportion merged in."""
        return dict(self._backward_options)

    # -- variables -------------------------------------------------------------------------------

    def build(self, input_shape) -> None:
        """Creates `kernel` and `biases`; a later call does not create them again."""
        for cell_options in (self._forward_options, self._backward_options):
            poplibs_options.check_when_built(cell_options)
        input_shape = tf.TensorShape(input_shape)
        if input_shape.rank != 3:
            raise ValueError(
                f"{type(self).__name__}: expecting input_shape with 3 dims "
                f"([time_len, batch_size, input_size]), got {input_shape}"
            )
        if input_shape[-1] is None:
            raise ValueError(
                f"{type(self).__name__}: the last dimension of the inputs should be "
                f"defined, got {input_shape}"
            )
        self._input_size = int(input_shape[-1])
        self.input_spec = tf.compat.v1.layers.InputSpec(ndim=3, axes={-1: self._input_size})
        weights_initializer = self._weights_initializer
        if weights_initializer is None:
            weights_initializer = tf.compat.v1.glorot_uniform_initializer(self._seed)
        bias_initializer = self._bias_initializer
        if bias_initializer is None:
            bias_initializer = tf.compat.v1.constant_initializer(0.0)
        self.kernel = self.add_weight(
            "kernel",
            shape=self.canonical_weight_shape,
            dtype=self._plain_dtype,
            initializer=weights_initializer,
        )
        self.biases = self.add_weight(
            "biases",
            shape=self.canonical_bias_shapes,
            dtype=self._plain_dtype,
            initializer=bias_initializer,
        )
        self.built = True

    # -- helpers for `call` ----------------------------------------------------------------------

    def state_shape(self, batch_size):
        """Shape of one state tensor: `[batch_size, num_units]`."""
        return [batch_size, self._num_units]

    def _compute_dtype(self) -> tf.DType:
        return recurrent_options.compute_dtype(self._plain_dtype, self._partials_dtype)

    def _as_inputs(self, inputs, time_major: bool = True) -> tf.Tensor:
        inputs = tf.convert_to_tensor(inputs, dtype=self._plain_dtype)
        if inputs.shape.rank != 3:
            raise ValueError(
                f"{type(self).__name__}: inputs must have rank 3, got shape {inputs.shape}"
            )
        return inputs if time_major else tf.transpose(inputs, [1, 0, 2])

    def _as_state(self, state, parameter: str) -> tf.Tensor:
        state = tf.convert_to_tensor(state, dtype=self._plain_dtype)
        if state.shape.rank is not None and (
            state.shape.rank != 2 or state.shape[-1] not in (None, self._num_units)
        ):
            raise ValueError(
                f"{type(self).__name__}: {parameter} must have shape [batch_size, "
                f"{self._num_units}], got {state.shape}"
            )
        return tf.cast(state, self._compute_dtype())

    def _as_seq_len(self, seq_len) -> tf.Tensor:
        seq_len = tf.convert_to_tensor(seq_len)
        if not seq_len.dtype.is_integer:
            raise TypeError(
                f"{type(self).__name__}: seq_len must be integers, got dtype {seq_len.dtype.name}"
            )
        if seq_len.shape.rank not in (None, 1):
            raise ValueError(
                f"{type(self).__name__}: seq_len must have shape [batch_size], got {seq_len.shape}"
            )
        return tf.cast(seq_len, tf.int32)

    def _split_kernel(self) -> tuple[tf.Tensor, tf.Tensor]:
        """The input and the recurrent kernel, in the compute dtype."""
        kernel = tf.cast(self.kernel, self._compute_dtype())
        return kernel[: self._input_size], kernel[self._input_size :]

    def _activations(self):
        return (
            activations.function(self._activation),
            activations.function(self._recurrent_activation),
        )

    def _result(self, outputs: tf.Tensor, state):
        """`(outputs, state)` in the layer's dtype, or `outputs` alone without `return_state`."""
        outputs = tf.cast(outputs, self._plain_dtype)
        if not self._return_state:
            return outputs
        return outputs, tf.nest.map_structure(lambda s: tf.cast(s, self._plain_dtype), state)


def _checked_num_units(owner: str, value) -> int:
    """num_units as the original takes it: a whole number in any numeric form (8.0 is 8;
    TensorFlow's shapes refuse 8.5, "Ambiguous dimension"), at least 1."""
    value = plain_int(value)
    units = as_attr_int(value, f"{owner}: num_units")
    if isinstance(value, numbers.Number) and units != value:
        raise ValueError(f"{owner}: num_units must be a whole number, got {value!r}")
    return recurrent_options.checked_units(owner, "num_units", units)


def _activation_name(owner: str, parameter: str, value, allowed: tuple[str, ...]) -> str:
    """The activation's name, from a name or a Keras/TensorFlow function (op_util.py); the
    TF1 layers have no "no activation": None is a value op_util cannot interpret."""
    name = None if value is None else activations.checked_name(owner, parameter, value, allowed)
    if name is None:
        choices = ", ".join(repr(name) for name in allowed)
        raise TypeError(
            f"{owner}: could not interpret {parameter} identifier None; give one of {choices}"
        )
    return name


def _checked_options(owner: str, parameter: str, value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{owner}: {parameter} must be a dict or None, got {value!r}")
    return dict(value)


def _merged_options(given: dict, proportion: float | None, which: str) -> dict:
    # The original: the value in `options` wins over the deprecated argument, with a warning.
    if proportion is None:
        return dict(given)
    if _AMP_OPTION in given:
        logging.getLogger(__name__).warning(
            "Both available_memory_proportion_%s=%s and options['%s']=%s are set; the value "
            "in options is used.",
            which,
            proportion,
            _AMP_OPTION,
            given[_AMP_OPTION],
        )
        return dict(given)
    return {**given, _AMP_OPTION: proportion}
