"""`tf.cond` (TensorFlow 2's `cond_v2`), hooked while replicated programs are built.

Why: on the IPU a collective may sit inside a conditional whose predicate the replicas
agree on (`assume_equal_across_replicas`): every replica takes the same branch and meets
the others there. A replicated program traced once copies replica 0's ops for the
others, and a cond's branches are functions every copy shares, where replicas cannot
meet. The engine (`engine/replicas/shared_cond.py`) builds such a conditional as one
cond whose branches build every replica's branch; this hook hands it `tf.cond` calls.

Checked with TensorFlow 2.21: `tf.cond` and autograph's `if` on tensors end in
`cond_v2.cond_v2(pred, true_fn, false_fn, name)` (tensorflow/python/ops/cond.py).
"""

from __future__ import annotations

from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, delegating, register

_handler: dict[str, Callable | None] = {"cond_v2": None}

COND_V2 = register(
    Patch(
        module="tensorflow.python.ops.cond_v2",
        attribute="cond_v2",
        kind=Kind.FUNCTION,
        replacement=lambda stock: delegating(stock, lambda: _handler["cond_v2"]),
        reason="a conditional holding a collective is built once for every replica of a "
        "program traced once (engine/replicas/shared_cond.py)",
        tensorflow=("2.21",),
    )
)


def install(handler: Callable) -> None:
    """`handler(stock, pred, true_fn, false_fn, name)` builds every `cond_v2` from now on."""
    _handler["cond_v2"] = handler
    apply(COND_V2)
