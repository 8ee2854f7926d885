"""tf.function's cache of traces, keyed also on openipu's configuration.

Why: on the IPU a program is compiled for the device configured when it runs; after
the system is configured again (a different number of IPUs), the original compiles
its programs again, and their replica count follows the new device
(tensorflow/compiler/plugin/poplar/driver/poplar_executor.cc compiles per
configured device). Here programs are replicated while they are traced, so a
tf.function the user traced under the old configuration (one wrapping
`strategy.run`, say) must be traced again. TensorFlow keys its traces on a
`FunctionContext` (`function_context.make_function_context`, called for every
tf.function call by `tracing_compilation`); the patch adds openipu's keys to its
`scope_type`, which TensorFlow uses for nothing but the key. Applied only once a
configuration changes (`retrace_when_changed`), so programs that configure once
run stock TensorFlow. Checked with TensorFlow 2.21.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

from openipu._src.integration.patching import Kind, Patch, apply, register

_lock = threading.Lock()
_keys: list[Callable[[], Hashable]] = []


def _keyed_by_openipu(stock: Callable) -> Callable:
    def make_function_context(scope_type=None):
        context = stock(scope_type)
        extra = tuple(key() for key in _keys)
        return context._replace(scope_type=(context.scope_type, extra))

    return make_function_context


FUNCTION_CONTEXT = register(
    Patch(
        module="tensorflow.python.eager.polymorphic_function.function_context",
        attribute="make_function_context",
        kind=Kind.FUNCTION,
        replacement=_keyed_by_openipu,
        reason="a tf.function traced for one IPU configuration is traced again after the "
        "system is configured differently (programs are replicated while traced)",
        tensorflow=("2.21",),
    )
)


def retrace_when_changed(key: Callable[[], Hashable]) -> None:
    """From now on, tf.functions are traced again whenever `key()` changes."""
    with _lock:
        if key not in _keys:
            _keys.append(key)
    apply(FUNCTION_CONTEXT)
