"""Float to unsigned integer casts in compiled programs convert as the IPU does.

The IPU converts a float to an unsigned integer through a signed integer, so a value out
of the unsigned range wraps, as in NumPy: -1.0 becomes 255 as uint8 (the original's
`tensorflow/python/ipu/tests/infeed_outfeed_test.py` testFeedInt8). XLA's conversion on
the host saturates instead (-1.0 becomes 0). So while a region is built, each such cast
is built as a cast to a wider signed integer followed by the integer cast, which wraps.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.framework import op_callbacks

_state = threading.local()

# The signed integer type each unsigned type is reached through: wide enough for its range.
_THROUGH = {tf.uint8: tf.int32, tf.uint16: tf.int32, tf.uint32: tf.int64}


def _wrapping_cast(
    op_type: str,
    inputs: tuple[tf.Tensor, ...],
    attrs: tuple[object, ...],
    outputs: list[tf.Tensor],
    op_name: str | None = None,
    graph: tf.Graph | None = None,
) -> list[tf.Tensor]:
    # An op callback: what it returns stands for the op's outputs (the next callback's too).
    if op_type != "Cast" or graph is None or not outputs or outputs[0].op.type != "Cast":
        return outputs
    op = outputs[0].op
    unsigned = op.get_attr("DstT")
    through = _THROUGH.get(unsigned)
    if through is None or not op.get_attr("SrcT").is_floating:
        return outputs
    return [tf.cast(tf.cast(inputs[0], through), unsigned)]


@contextlib.contextmanager
def wrapping() -> Iterator[None]:
    """While a region is built, its float to unsigned integer casts wrap (see the module)."""
    if getattr(_state, "active", False):  # a region built inside another's building
        yield
        return
    op_callbacks.add_op_callback(_wrapping_cast)
    _state.active = True
    try:
        yield
    finally:
        _state.active = False
        op_callbacks.remove_op_callback(_wrapping_cast)
