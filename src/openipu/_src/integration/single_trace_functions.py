"""One trace, not two, for an engine program whose first trace creates variables.

TensorFlow 2.21's `tf.function` (eager/polymorphic_function/polymorphic_function.py,
`Function._call`): when the first trace creates variables, it lifts their initializers
out, runs them, and then traces the function a second time under a scope that forbids
creating variables, and runs that trace. Each trace of an engine program costs as much as
building the whole program (a Keras model's step, its optimizer and the loop around it:
most of a small `fit`), so the first call cost two.

The first trace is a valid program: each variable it created initializes itself behind a
`var_is_initialized` check (polymorphic_function.py `UnliftedInitializerVariable`), which
is false once the initializers were lifted and run. `trace_once` makes the function run
that first trace, on its first and later calls, instead of tracing again. It is used only
for programs run as TensorFlow graphs: TensorFlow does not support those checks under
XLA. What is lost is TensorFlow's error for a variable created by a later trace (another
input signature); the engine builds its own state once per program (keyed buffers).
"""

from __future__ import annotations

from typing import Any


def trace_once(function: Any) -> Any:
    """`function` (a `tf.function`), set to reuse its variable-creating first trace."""
    initialize = function._initialize  # noqa: SLF001 - TensorFlow's Function internals

    def initialize_and_reuse_the_first_trace(*args: Any, **kwargs: Any) -> None:
        initialize(*args, **kwargs)
        function._no_variable_creation_config = function._variable_creation_config  # noqa: SLF001

    function._initialize = initialize_and_reuse_the_first_trace  # noqa: SLF001
    return function
