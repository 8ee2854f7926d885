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


def checked_name(owner: str, parameter: str, value, allowed: tuple[str, ...]) -> str | None:
    """`value` if it is one of `allowed` (or None), else a ValueError naming the choices."""
    if value is None or (isinstance(value, str) and value in allowed):
        return value
    choices = ", ".join(repr(name) for name in allowed)
    raise ValueError(f"{owner}: {parameter} must be one of {choices} or None, got {value!r}")


def function(name: str | None) -> Callable[[tf.Tensor], tf.Tensor]:
    if name is None:
        return tf.identity
    return _ACTIVATIONS[name]
