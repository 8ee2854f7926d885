"""Autograph's `tf.range` loop lowering and `next()` on `tf.data` iterators, hooked.

Why: the engine rewrites `for _ in tf.range(n): next(iterator)` loops inside a
compiled region into fused device loops (`engine/autograph_loops.py`). Autograph
offers no hook for its loop lowering, and `next()` on an `OwnedIterator` ends in
`_next_internal`, so both are replaced while some region is traced (counted:
the last region out restores them) and hand over to the engine's handlers,
which act for the tracing thread only and otherwise call the stock functions.

Checked with TensorFlow 2.21 (`control_flow._tf_range_for_stmt` is what
`for_stmt` calls for a `tf.range` iterable; `OwnedIterator.__next__` calls
`self._next_internal()`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from openipu._src.integration.patching import Kind, Patch, applied, delegating, register

_handlers: dict[str, Callable | None] = {"range_for_stmt": None, "next_internal": None}

RANGE_FOR_STMT = register(
    Patch(
        module="tensorflow.python.autograph.operators.control_flow",
        attribute="_tf_range_for_stmt",
        kind=Kind.FUNCTION,
        replacement=lambda stock: delegating(stock, lambda: _handlers["range_for_stmt"]),
        reason="autograph lowers `for _ in tf.range(n)` here: the engine fuses loops that "
        "read tf.data iterators into device loops",
        tensorflow=("2.21",),
    )
)

OWNED_ITERATOR_NEXT = register(
    Patch(
        module="tensorflow.python.data.ops.iterator_ops",
        attribute="OwnedIterator._next_internal",
        kind=Kind.METHOD,
        replacement=lambda stock: delegating(stock, lambda: _handlers["next_internal"]),
        reason="`next(iterator)` in a fused loop body reads the element the host fetched "
        "for that iteration instead of an IteratorGetNext op",
        tensorflow=("2.21",),
    )
)


@contextlib.contextmanager
def hooked(range_for_stmt: Callable, next_internal: Callable) -> Iterator[None]:
    """Within this context autograph's range loops and `next()` go to the handlers.

    `range_for_stmt(stock, iter_, extra_test, body, get_state, set_state, symbol_names,
    opts)` and `next_internal(stock, iterator)` get the stock function first. The
    handlers are the engine's, the same on every call.
    """
    _handlers["range_for_stmt"] = range_for_stmt
    _handlers["next_internal"] = next_internal
    with applied(RANGE_FOR_STMT), applied(OWNED_ITERATOR_NEXT):
        yield
