"""The Python a `tf.function` runs when the engine traces it inline.

The engine traces some user functions as part of its own graphs (an executable's step,
a serving step) instead of calling them: it takes a tf.function's Python function. Its
own trace would have converted that function with autograph (unless it was made with
`autograph=False`), and so the original's calls did (ops/application_compile_op.py calls
the user's tf.function): it is converted here the same way. A plain Python function is
called as it is, as the original's `_compile_function` does (no autograph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorflow.python.autograph.core import ag_ctx
from tensorflow.python.autograph.impl import api as autograph
from tensorflow.python.eager.polymorphic_function import polymorphic_function


def python_to_trace(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`'s Python function, autograph-converted where `fn` is a tf.function with autograph."""
    if not isinstance(fn, polymorphic_function.Function):
        return fn
    python_function: Callable[..., Any] = fn.python_function
    if not fn._autograph:  # noqa: SLF001 - the tf.function's own setting
        return python_function
    converted: Callable[..., Any] = autograph.tf_convert(
        python_function, ag_ctx.ControlStatusCtx(ag_ctx.Status.ENABLED)
    )
    return converted
