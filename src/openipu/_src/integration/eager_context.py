"""Repair: TensorFlow's context stack after `disable_eager_execution()`.

Target: `tensorflow.python.eager.context.Context.context_switches` (its stack of
contexts that `ops.init_scope` searches for the outermost non-function context),
TensorFlow 2.21.

Why: openipu sets up its logical devices when `tensorflow.python.ipu` is imported,
which creates TensorFlow's eager context while eager execution is still the default;
the context's stack then starts with an eager entry. A TF1 program that calls
`tf.compat.v1.disable_eager_execution()` afterwards builds in the global default
graph, which is not on that stack, so `init_scope` inside a `tf.while_loop` body
finds the stale eager entry and makes eager tensors, which the graph cannot capture
("Attempting to capture an EagerTensor without building a function"). Had the
context been created after `disable_eager_execution()`, as it is without openipu,
the stack would be empty; `repair()` removes the stale entry so that it is.
"""

from __future__ import annotations

from tensorflow.python.eager import context


def repair() -> None:
    """Drops the eager entry left at the bottom of the context stack once eager is disabled."""
    if context.default_execution_mode != context.GRAPH_MODE:
        return
    current = context.context_safe()
    if current is None:
        return
    stack = current.context_switches.stack
    if (
        stack
        and not stack[0].is_building_function
        and stack[0].enter_context_fn is context.eager_mode
    ):
        del stack[0]
