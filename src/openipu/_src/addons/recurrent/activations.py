"""The activations Popnn recurrent layers accept, by name.

Popnn implements a fixed set of non-linearities; the recurrent (gate)
activation must produce values in [0, 1], so relu is not among those.
None means no activation (`a(x) = x`), as the Keras layers' documentation
says (the original raised a TypeError for None; openipu follows the documentation).
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from openipu._src.ops import nn_ops

_ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "tanh": tf.tanh,
    "relu": tf.nn.relu,
    "softmax": tf.nn.softmax,
    "sigmoid": tf.sigmoid,
    "hard_sigmoid": nn_ops.hard_sigmoid,
}

ACTIVATION_NAMES = ("tanh", "relu", "softmax", "sigmoid", "hard_sigmoid")
RECURRENT_ACTIVATION_NAMES = ("tanh", "softmax", "sigmoid", "hard_sigmoid")


# The original's op_util.get_activation_name accepts functions from these modules only
# (Keras activations and TensorFlow's math ops); today's `tf.tanh`/`tf.nn.relu` live in the
# generated op modules, so those count as the math ops they were.
ACTIVATION_MODULE_SUFFIXES = (
    "keras.activations",
    "keras.src.activations",
    "tensorflow.python.ops.math_ops",
    "tensorflow.python.ops.gen_math_ops",
    "tensorflow.python.ops.nn_ops",
    "tensorflow.python.ops.gen_nn_ops",
)


def checked_name(owner: str, parameter: str, value, allowed: tuple[str, ...]) -> str | None:
    """The name of `value` (a name, None, or a Keras/TensorFlow activation function) if it is
    one of `allowed`, else the original's error: a TypeError for a function of another module
    or a value of another kind, a ValueError naming the choices (tensorflow/python/ipu/ops/
    op_util.py get_activation_name, ipu_tensorflow_addons/keras/layers/rnn.py)."""
    if value is None:
        return value
    choices = ", ".join(repr(name) for name in allowed)
    if callable(value) and not isinstance(value, str):
        module = getattr(value, "__module__", "") or ""
        if not module.endswith(ACTIVATION_MODULE_SUFFIXES):
            raise TypeError(
                f"{owner}: {parameter}: unrecognized function "
                f"{module}.{getattr(value, '__name__', value)!s}; give one of {choices}"
            )
        value = value.__name__
    elif not isinstance(value, str):
        raise TypeError(
            f"{owner}: could not interpret {parameter} identifier {value!r}; give one of {choices}"
        )
    if value in allowed:
        return value
    raise ValueError(f"{owner}: {parameter} must be one of {choices} or None, got {value!r}")


def function(name: str | None) -> Callable[[tf.Tensor], tf.Tensor]:
    if name is None:
        return tf.identity
    return _ACTIVATIONS[name]
