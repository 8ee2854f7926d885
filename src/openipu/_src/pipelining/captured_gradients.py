"""A training pipeline's captured upstream gradients (`capture_upstream_gradients`).

As the original's pipeline (ipu/ops/pipelining_ops.py): after a mini-batch's gradients
are taken, the gradients captured by the optimizer function's `GradientCaptureTape` (or
`gradient_capture_context`) are read; they are accumulated over the group of mini-batches
like the variables' gradients (unless `gradient_accumulation_for_captured_grads` is
False: then the last mini-batch's are kept); at the weight update they are given to an
optimizer that takes them (`apply_gradients(..., captured_grads=...)`) and pushed to the
`captured_gradient_outfeed`.
"""

from __future__ import annotations

import inspect
from typing import Any

from openipu._src.eager.backprop import GradientCaptureTape
from openipu._src.engine.gradient_accumulation import CapturedGradients


def read(result: Any) -> CapturedGradients | None:
    """The gradients captured by the optimizer function's tape or capture context.

    `result` is what the optimizer function returned, read as the original reads it
    (ops/pipelining_ops.py:1034-1050): its `tape`, then (unless that is a capture tape)
    its `gradient_capture_context`, an object without them failing with AttributeError."""
    if not result:
        return None
    tape = result.tape
    source = tape if tape and isinstance(tape, GradientCaptureTape) else None
    if not source:
        source = result.gradient_capture_context or None
    if not source:
        return None
    captured = source.captured_gradients
    return dict(captured) if captured else None


def optimizer_takes_them(opt: object) -> bool:
    """Whether the original's pipeline hands `captured_grads` to `opt.apply_gradients`:
    an optimizer saying `supports_captured_grads`, or whose keyword-arguments parameter
    is named so (the original tests the name of `apply_gradients`' `**` parameter)."""
    if getattr(opt, "supports_captured_grads", False):
        return True
    apply_gradients = getattr(type(opt), "apply_gradients", None)
    if apply_gradients is None:
        return False
    try:
        spec = inspect.getfullargspec(apply_gradients)
    except TypeError:
        return False
    return bool(spec.varkw and "captured_grads" in spec.varkw)
