"""Outlined functions (`ipu.functional_ops`)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import tensorflow as tf


def outlined_function(
    func: Callable | None = None,
    unique_sharding: bool = False,
    keep_input_layouts: bool | None = None,
    name: str | None = None,
):
    """Decorator making `func` an outlined function: one code block called from many places.

    Outlining saves IPU code memory; the numbers are those of calling `func`,
    which is what happens here. Arguments are positional only and become
    runtime tensors.
    `unique_sharding` and `keep_input_layouts` are placement hints, kept.
    """

    def decorate(inner: Callable) -> Callable:
        scope = str(name or getattr(inner, "__name__", "outlined_function"))

        @functools.wraps(inner)
        def outlined(*args):
            # Bool attributes of the original's Function op, made when the function is
            # called, not decorated (ops/functional_ops.py).
            _check_options(unique_sharding, keep_input_layouts)
            with tf.name_scope(_scope_name(scope)):
                tensors = [tf.convert_to_tensor(a) for a in args]
                # What it returns, tensors or not (a function that only assigns variables
                # returns None), as the original packs its structured outputs.
                return inner(*tensors)

        return outlined

    return decorate if func is None else decorate(func)


def _check_options(unique_sharding, keep_input_layouts) -> None:
    if not isinstance(unique_sharding, bool):
        raise TypeError(
            f"outlined_function: unique_sharding must be a bool, got {unique_sharding!r}"
        )
    if keep_input_layouts is not None and not isinstance(keep_input_layouts, bool):
        raise TypeError(
            "outlined_function: keep_input_layouts must be a bool or None, "
            f"got {keep_input_layouts!r}"
        )


def _scope_name(name: str) -> str:
    # Name scopes only take [A-Za-z0-9_.\-/]; a lambda's "<lambda>" does not qualify.
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    return cleaned.lstrip("_.-") or "outlined_function"
