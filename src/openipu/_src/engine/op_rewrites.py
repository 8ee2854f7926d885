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

_REWRITTEN = frozenset({"Cast", *seeded_samplers.SAMPLERS})


def _rewrite(
    op_type: str,
    inputs: tuple[tf.Tensor, ...],
    attrs: tuple[object, ...],
    outputs: list[tf.Tensor] | None,
    op_name: str | None = None,
    graph: tf.Graph | None = None,
) -> list[tf.Tensor] | None:
    # What a callback returns stands for the op's outputs (and is the next callback's
    # input); None, from an earlier callback, keeps the op's own.
    if graph is None or op_type not in _REWRITTEN:
        return outputs
    if outputs is None:
        op = graph.get_operation_by_name(op_name) if op_name else None
    else:
        op = outputs[0].op if outputs else None
    if op is None or op.type != op_type:
        return outputs  # another callback replaced the op already
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
