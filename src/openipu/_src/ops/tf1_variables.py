"""TF1 `variable_scope` parameters that also work in TF2 functions.

The functional normalisation ops create `beta`/`gamma` with
`tf.compat.v1.get_variable`, as the original does. In a TF1 graph that is all.
In TF2, `get_variable` inside a `tf.function` would create new variables on
every trace, which `tf.function` refuses; and default scope names ("GroupNorm",
"GroupNorm_1", ...) keep counting up across traces. So in TF2 (unless a
Keras `track_tf1_style_variables` store is active, which already handles it):

- default scope names are numbered per traced function (branches and loop
  bodies included), so each retrace of a function finds the same names;
- variables are created outside the function (`tf.init_scope`) and kept in a
  process-wide store by full name, so retraces, and other functions using the
  same scope names, share them, like TF1's `reuse=AUTO_REUSE`.

Eagerly, a default-named scope gets a new number on every call (TensorFlow's
own behaviour), hence fresh variables, which the store does not keep.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import weakref
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.framework.func_graph import FuncGraph
from tensorflow.python.ops import variable_scope as tf1_variable_scope

_lock = threading.Lock()
_variables: dict[str, tf.Variable] = {}
_scope_counts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _tf2_store_needed() -> bool:
    if not tf.compat.v1.executing_eagerly_outside_functions():
        return False
    store = tf1_variable_scope._get_default_variable_store()  # noqa: SLF001
    return not getattr(store, "_store_eager_variables", False)


@contextlib.contextmanager
def parameter_scope(scope, default_name: str, values, reuse) -> Iterator[None]:
    """`tf.compat.v1.variable_scope(scope, default_name, values, reuse=reuse)`, TF2-proofed."""
    if not _tf2_store_needed():
        with tf.compat.v1.variable_scope(scope, default_name, values, reuse=reuse):
            yield
        return
    if scope is None and not tf.executing_eagerly():
        scope = _numbered_in_graph(default_name)
    getter = _StoredGetter(keep=scope is not None, reuse=reuse)
    with tf.compat.v1.variable_scope(scope, default_name, values, custom_getter=getter):
        yield


def _numbered_in_graph(default_name: str) -> str:
    graph = _outermost_function_graph(tf.compat.v1.get_default_graph())
    prefix = tf.compat.v1.get_variable_scope().name
    with _lock:
        counts = _scope_counts.setdefault(graph, collections.Counter())
        key = f"{prefix}/{default_name}"
        number = counts[key]
        counts[key] += 1
    return default_name if number == 0 else f"{default_name}_{number}"


def _outermost_function_graph(graph):
    # Branches and loop bodies are graphs of their own: count in the traced function's graph.
    while isinstance(getattr(graph, "outer_graph", None), FuncGraph):
        graph = graph.outer_graph
    return graph


class _StoredGetter:
    """A `custom_getter` keeping the scope's variables in the process-wide store."""

    def __init__(self, keep: bool, reuse) -> None:
        self._keep = keep
        self._reuse = reuse

    def __call__(self, getter, name, *args, shape=None, dtype=None, initializer=None, **kwargs):
        with _lock:
            existing = _variables.get(name)
        if existing is not None:
            if shape is not None and not existing.shape.is_compatible_with(shape):
                raise ValueError(
                    f"Trying to share variable {name}, but specified shape {list(shape)} "
                    f"and found shape {existing.shape}."
                )
            return existing
        if self._reuse is True:
            raise ValueError(
                f"Variable {name} does not exist, or was not created with tf.get_variable(). "
                "Did you mean to set reuse=tf.AUTO_REUSE in VarScope?"
            )
        dtype = tf.as_dtype(dtype or tf.float32)
        trainable = kwargs.get("trainable")
        with tf.init_scope():
            variable = tf.Variable(
                _initial_value(initializer, shape, dtype),
                name=name,
                dtype=dtype,
                trainable=True if trainable is None else trainable,
            )
        if self._keep:
            with _lock:
                _variables[name] = variable
        return variable


def _initial_value(initializer, shape, dtype: tf.DType):
    if initializer is None:
        initializer = tf.compat.v1.glorot_uniform_initializer()
    if callable(initializer):
        return lambda: initializer(shape, dtype=dtype)
    return tf.cast(initializer, dtype)


def forget_all() -> None:
    """Drops the TF2 store (for tests and new programs)."""
    with _lock:
        _variables.clear()
