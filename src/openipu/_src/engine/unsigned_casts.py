"""Float to unsigned integer casts in compiled programs convert as the IPU does.

The IPU converts a float to an unsigned integer through a signed integer, so a value out
of the unsigned range wraps, as in NumPy: -1.0 becomes 255 as uint8 (the original's
`tensorflow/python/ipu/tests/infeed_outfeed_test.py` testFeedInt8). XLA's conversion on
the host saturates instead (-1.0 becomes 0). So while a region is built, each such cast
is built as a cast to a wider signed integer followed by the integer cast, which wraps
(see `op_rewrites`).
"""

from __future__ import annotations

import tensorflow as tf

# The signed integer type each unsigned type is reached through: wide enough for its range.
_THROUGH = {tf.uint8: tf.int32, tf.uint16: tf.int32, tf.uint32: tf.int64}


def rewrite(op: tf.Operation, inputs: tuple[tf.Tensor, ...]) -> list[tf.Tensor] | None:
    """A float to unsigned cast through a signed integer; None for other casts."""
    unsigned = op.get_attr("DstT")
    through = _THROUGH.get(unsigned)
    if through is None or not op.get_attr("SrcT").is_floating:
        return None
    return [tf.cast(tf.cast(inputs[0], through), unsigned)]
