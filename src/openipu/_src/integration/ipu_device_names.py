"""Patch: a graph's `tf.device("/device:IPU:<n>")` places operations on that emulated IPU.

Targets: `tensorflow.python.framework.ops.Graph.device` (a method: `tf.compat.v1.device`
in graphs, TF1 sessions and tf.functions) and `tensorflow.python.framework.ops.device`
(a function: what `tf.device` calls, which in a graph built while eager execution is on
also enters the eager context's device scope, whose name the graph's operations would
take), TensorFlow 2.21.

Why: the original registers its IPUs with TensorFlow as XLA devices named "IPU", so a
graph's operations placed with a plain device scope run there (its tests do this
throughout, e.g. tensorflow/python/ipu/tests/math_ops_test.py). openipu's IPUs are
emulated on host devices, which `ipu.scopes.ipu_scope` maps an IPU's name to; a plain
device scope naming an IPU is given the same meaning (the scope `install` is given), so
that `Session.run` finds a device for those operations. Other device names, and device
functions, keep TensorFlow's meaning.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from tensorflow.python.eager import context
from tensorflow.python.framework import device_spec, ops

from openipu._src.integration.patching import Kind, Patch, apply, register

_ipu_scopes: list[Callable[[str], contextlib.AbstractContextManager[None]]] = []


def _names_an_ipu(name: object) -> bool:
    if not isinstance(name, str) or "IPU" not in name.upper():
        return False
    try:
        spec = device_spec.DeviceSpecV2.from_string(name)
    except ValueError:
        return False
    return (spec.device_type or "").upper() == "IPU" and spec.device_index is not None


def _replacement(stock: Callable) -> Callable:
    @functools.wraps(stock)
    def device(self: ops.Graph, device_name_or_function: Any) -> Any:
        if (
            _ipu_scopes
            and self is ops.get_default_graph()
            and _names_an_ipu(device_name_or_function)
        ):
            return _ipu_scopes[0](device_name_or_function)
        return stock(self, device_name_or_function)

    return device


def _function_replacement(stock: Callable) -> Callable:
    @functools.wraps(stock)
    def device(device_name_or_function: Any) -> Any:
        if (
            _ipu_scopes
            and not context.executing_eagerly()
            and _names_an_ipu(device_name_or_function)
        ):
            return _ipu_scopes[0](device_name_or_function)
        return stock(device_name_or_function)

    return device


DEVICE = register(
    Patch(
        module="tensorflow.python.framework.ops",
        attribute="device",
        kind=Kind.FUNCTION,
        replacement=_function_replacement,
        reason="tf.device('/device:IPU:<n>') while building a graph places its operations on "
        "the emulated IPU's host device, as ipu_scope does",
        tensorflow=("2.21",),
    )
)

GRAPH_DEVICE = register(
    Patch(
        module="tensorflow.python.framework.ops",
        attribute="Graph.device",
        kind=Kind.METHOD,
        replacement=_replacement,
        reason="a graph's plain tf.device('/device:IPU:<n>') places its operations on the "
        "emulated IPU's host device, as ipu_scope does (the original's IPUs are TensorFlow "
        "devices)",
        tensorflow=("2.21",),
    )
)


def install(ipu_scope: Callable[[str], contextlib.AbstractContextManager[None]]) -> None:
    """Device scopes naming an IPU enter `ipu_scope(name)` (idempotent; the first stays)."""
    if not _ipu_scopes:
        _ipu_scopes.append(ipu_scope)
    apply(GRAPH_DEVICE)
    apply(DEVICE)
