"""Variables that hold the engine's own state, not the user's.

Outfeed buffers, replicas' copies of variables and gradient accumulators are device
memory on an IPU, not variables a program creates: the original's programs neither
initialize nor save them. Made with `engine_variable`, in TF2 they are ordinary
variables (initialized when created); in a TF1 graph they are kept out of the
graph's global and trainable collections (so `global_variables_initializer` and
`Saver` never see them) and listed in `ENGINE_VARIABLES`, and a session initializes
those it has not initialized yet before it runs (`integration/session_run.py`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import resource_variable_ops

from openipu._src.integration import session_run

ENGINE_VARIABLES = "openipu_engine_variables"

_lock = threading.Lock()
# Per session: how many of its graph's engine variables it has initialized.
_initialized: weakref.WeakKeyDictionary[tf.compat.v1.Session, int] = weakref.WeakKeyDictionary()


def engine_variable(
    initial_value: object, name: str, **kwargs: object
) -> resource_variable_ops.ResourceVariable:
    """A non-trainable resource variable of engine state, made in the current context."""
    if ops.executing_eagerly_outside_functions():
        made = resource_variable_ops.ResourceVariable(
            initial_value, trainable=False, name=name, **kwargs
        )
    else:
        session_run.add_before_run(_initialize_new, order=BEFORE_RUN_ORDER)
        made = resource_variable_ops.ResourceVariable(
            initial_value, trainable=False, name=name, collections=[ENGINE_VARIABLES], **kwargs
        )
    made._openipu_engine_state = True  # noqa: SLF001 - read by `is_engine_state`
    return made


def is_engine_state(variable: object) -> bool:
    """Whether `variable` is engine state (made by `engine_variable`), not the user's."""
    return bool(getattr(variable, "_openipu_engine_state", False))


#: After programs built before the system was configured are finished (they may add some).
BEFORE_RUN_ORDER = 10


def _initialize_new(session: tf.compat.v1.Session, run: Callable[..., object]) -> None:
    """Initializes the engine variables of the session's graph it has not initialized yet."""
    graph = session.graph
    pending = graph.get_collection(ENGINE_VARIABLES)
    with _lock:
        done = _initialized.get(session, 0)
        _initialized[session] = len(pending)
    if len(pending) > done:
        # A list of the initializers, not a new group op: a MonitoredSession's graph is
        # finalized when it runs.
        run([variable.initializer for variable in pending[done:]])
