"""`tf.cond` and `tf.while_loop` (TensorFlow 2's `cond_v2`, `while_v2`), hooked while
replicated programs are built.

Why: on the IPU a collective may sit inside a conditional whose predicate the replicas
agree on (`assume_equal_across_replicas`): every replica takes the same branch and meets
the others there. A replicated program traced once copies replica 0's ops for the
others, and a cond's branches are functions every copy shares, where replicas cannot
meet. The engine (`engine/replicas/shared_cond.py`) builds such a conditional as one
cond whose branches build every replica's branch; this hook hands it `tf.cond` calls.

The same holds of a loop whose trip count the replicas agree on, around a collective
(`engine/replicas/shared_while.py`); this hook hands it `tf.while_loop` calls.

Checked with TensorFlow 2.21: `tf.cond` and autograph's `if` on tensors end in
`cond_v2.cond_v2(pred, true_fn, false_fn, name)` (tensorflow/python/ops/cond.py);
`tf.while_loop` and autograph's `while` on tensors in `while_v2.while_loop(cond, body,
loop_vars, ...)` (tensorflow/python/ops/while_loop.py), with control flow v2.
"""

from __future__ import annotations

from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, delegating, register

_handler: dict[str, Callable | None] = {"cond_v2": None, "while_v2": None}


def _hook(key: str, module: str, attribute: str, what: str, engine_module: str) -> Patch:
    """The patch handing `module.attribute` calls to the handler installed under `key`."""
    return register(
        Patch(
            module=module,
            attribute=attribute,
            kind=Kind.FUNCTION,
            replacement=lambda stock: delegating(stock, lambda: _handler[key]),
            reason=f"a {what} holding a collective is built once for every replica of a "
            f"program traced once ({engine_module})",
            tensorflow=("2.21",),
        )
    )


COND_V2 = _hook(
    "cond_v2",
    "tensorflow.python.ops.cond_v2",
    "cond_v2",
    "conditional",
    "engine/replicas/shared_cond.py",
)
WHILE_V2 = _hook(
    "while_v2",
    "tensorflow.python.ops.while_v2",
    "while_loop",
    "loop",
    "engine/replicas/shared_while.py",
)


def install(handler: Callable) -> None:
    """`handler(stock, pred, true_fn, false_fn, name)` builds every `cond_v2` from now on."""
    _handler["cond_v2"] = handler
    apply(COND_V2)


def install_while(handler: Callable) -> None:
    """`handler(stock, cond, body, loop_vars, **options)` builds every `while_v2` loop."""
    _handler["while_v2"] = handler
    apply(WHILE_V2)
