"""Operations rebuilt while a region is built, so a program computes as on the IPU.

An op callback sees each operation TensorFlow creates in the region and may stand other
tensors in for its outputs: float to unsigned integer casts wrap (`unsigned_casts`), and
seeded candidate samplers sample alike every run (`seeded_samplers`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.framework import op_callbacks

from openipu._src.engine import seeded_samplers, unsigned_casts

_state = threading.local()


def _rewrite(
    op_type: str,
    inputs: tuple[tf.Tensor, ...],
    attrs: tuple[object, ...],
    outputs: list[tf.Tensor],
    op_name: str | None = None,
    graph: tf.Graph | None = None,
) -> list[tf.Tensor]:
    # What a callback returns stands for the op's outputs (and is the next callback's input).
    if graph is None or not outputs or outputs[0].op.type != op_type:
        return outputs  # eager, or another callback replaced the op already
    op = outputs[0].op
    replacement = None
    if op_type == "Cast":
        replacement = unsigned_casts.rewrite(op, inputs)
    elif op_type in seeded_samplers.SAMPLERS:
        replacement = seeded_samplers.rewrite(op, inputs)
    return outputs if replacement is None else replacement


@contextlib.contextmanager
def rewriting() -> Iterator[None]:
    """While a region is built, its operations are rewritten (see the module)."""
    if getattr(_state, "active", False):  # a region built inside another's building
        yield
        return
    op_callbacks.add_op_callback(_rewrite)
    _state.active = True
    try:
        yield
    finally:
        _state.active = False
        op_callbacks.remove_op_callback(_rewrite)
