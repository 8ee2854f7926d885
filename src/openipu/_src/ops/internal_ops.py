"""Graphcore utility operators (`ipu.internal_ops`): printing and tile remapping.

`fifo` and `get_current_iteration_counter` belong to the device loop and are
implemented with it.
"""

from __future__ import annotations

import sys

import tensorflow as tf


def print_tensor(input, name: str = ""):  # noqa: A002 - the original's parameter name
    """Prints `input` to standard error when the returned operation runs.

    Eagerly it prints at once (and returns None). Printing is a host
    operation: a program containing it is not compiled with XLA as a whole.
    """
    values = tf.convert_to_tensor(input)
    if name:
        return tf.print(f"{name}:", values, output_stream=sys.stderr, summarize=-1)
    return tf.print(values, output_stream=sys.stderr, summarize=-1)


def remap(x, name=None) -> tf.Tensor:
    """A copy of `x` laid out linearly over the IPU's tiles (a layout change only)."""
    return tf.identity(x, name=name or "remap")


def remap_deduce(x, name=None) -> tf.Tensor:
    """A copy of `x` with a tile layout deduced from `x` (a layout change only)."""
    return tf.identity(x, name=name or "remap_deduce")
