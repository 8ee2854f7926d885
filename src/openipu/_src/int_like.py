"""Integers given in the forms the original's programs pass them.

The original hands counts and sizes to TensorFlow, which takes a TF1
`Dimension` (`tensor.shape[0]` in graph mode), a numpy integer or a scalar
tensor whose value is known as readily as an int. openipu needs Python ints
for them, so these forms are read as the int they hold before any check.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf


def plain_int(value: Any) -> Any:
    """`value` as a Python int when it is an integer in another form, else `value` itself.

    A `Dimension` gives its value (None when unknown); a numpy integer or 0-d integer
    array its int; a scalar integer tensor its value when TensorFlow knows it without
    running anything (eager tensors, constants). Anything else, bools included, is
    returned unchanged for the caller's own checks.
    """
    if isinstance(value, tf.compat.v1.Dimension):
        return value.value
    if isinstance(value, (bool, np.bool_)):
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu":
        return int(value)
    if isinstance(value, (tf.Tensor, tf.Variable)) and value.dtype.is_integer:
        known = tf.get_static_value(value)
        if known is not None and np.ndim(known) == 0:
            return int(known)
    return value


def as_attr_int(value: Any, what: str) -> int:
    """`value` as an op's int attribute takes it (TensorFlow's op_def_library._MakeInt): any
    number int() accepts (2.5 gives 2), but a str is a TypeError, as is what int() refuses."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} must be an int, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an int, got {value!r}") from None
