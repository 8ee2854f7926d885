"""Building a TF1 program again: `get_variable` finds the variables the first build made.

A program is built more than once where the original builds it once (built before the
system was configured, or again with fewer replicas, or traced twice for an
executable). In a TF1 graph `get_variable` refuses to make a variable twice, so a
rebuild runs in the first build's variable scope with `AUTO_REUSE`. One difference from
a first call must be undone: a variable made from a value (a NumPy array, a tensor)
without a dtype takes the value's dtype, but finding it again `get_variable` compares
with the scope's default dtype (float32) and refuses a float16 variable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from tensorflow.python.ops import variable_scope


class ScopeNumbering:
    """How the graph's default-named variable scopes were numbered when a build began."""

    def __init__(self) -> None:
        self.counts = dict(_scope_store().variable_scopes_count)

    @contextlib.contextmanager
    def replayed(self) -> Iterator[None]:
        """Within: default-named scopes are numbered as in the build that began here;
        after, each name's count is the higher of the two builds'."""
        store = _scope_store()
        current = dict(store.variable_scopes_count)
        store.variable_scopes_count = dict(self.counts)
        try:
            yield
        finally:
            rebuilt = store.variable_scopes_count
            store.variable_scopes_count = {
                name: max(current.get(name, 0), rebuilt.get(name, 0))
                for name in {*current, *rebuilt}
            }


@contextlib.contextmanager
def finding_variables_again(
    scope: tf.compat.v1.VariableScope | None = None,
    numbering: ScopeNumbering | None = None,
) -> Iterator[None]:
    """Within: `get_variable` in `scope` (the current one by default) finds existing ones;
    with the first build's `numbering`, default-named scopes find theirs too."""
    scope = scope if scope is not None else tf.compat.v1.get_variable_scope()
    with (
        tf.compat.v1.variable_scope(
            scope, reuse=tf.compat.v1.AUTO_REUSE, custom_getter=_initial_value_dtype
        ),
        numbering.replayed() if numbering is not None else contextlib.nullcontext(),
    ):
        yield


def _scope_store() -> Any:
    return variable_scope.get_variable_scope_store()


def _initial_value_dtype(getter: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    initializer = kwargs.get("initializer")
    value_dtype = getattr(initializer, "dtype", None)
    if value_dtype is not None and not callable(initializer):
        kwargs["dtype"] = tf.as_dtype(value_dtype)
    return getter(*args, **kwargs)
