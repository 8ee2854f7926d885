"""Steps frozen for export: a function traced once with its signature, its variables made
constants (the original's `_freeze_defunc`), callable as plain TensorFlow ops."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import convert_to_constants
from tensorflow.python.util import nest

from openipu._src.engine import traced_python
from openipu._src.engine.executable import program_graph

_state = threading.local()


@contextlib.contextmanager
def for_tf1_program() -> Iterator[None]:
    """Steps made within are a TF1 program's (see `FrozenStep`)."""
    previous = getattr(_state, "tf1", False)
    _state.tf1 = True
    try:
        yield
    finally:
        _state.tf1 = previous


class FrozenStep:
    """`step` traced for `signature` with its variables' current values as constants."""

    def __init__(self, step: Callable[..., Any], signature: Sequence[tf.TensorSpec]) -> None:
        self.signature = list(signature)
        self.name = getattr(step, "__name__", "step")
        python_step = traced_python.python_to_trace(step)
        if getattr(_state, "tf1", False):
            # A TF1 program's step (tf.compat.v1.get_variable, layers of tf.compat.v1):
            # traced in a TF1-style graph, its variables lifted out, as the original's TF1
            # export builds it in a graph of its own (r1.15 serving.py).
            concrete = tf.compat.v1.wrap_function(python_step, self.signature)
        else:
            traced = tf.function(lambda *args: python_step(*args), input_signature=self.signature)
            concrete = traced.get_concrete_function()
        self.variables = [v for v, _ in program_graph.captured_variables(concrete)]
        self._concrete = concrete

    def freeze(self) -> None:
        """Takes the variables' values now (after any restore or initializer)."""
        self._frozen = convert_to_constants.convert_variables_to_constants_v2(
            self._concrete, lower_control_flow=False
        )
        self.output_signature = [tf.TensorSpec(t.shape, t.dtype) for t in self._frozen.outputs]

    def __call__(self, *args: tf.Tensor) -> list[tf.Tensor]:
        return list(nest.flatten(self._frozen(*args)))


def restore_from_checkpoint(directory: str, steps: Sequence[FrozenStep]) -> None:
    """Sets the steps' variables from the latest checkpoint in `directory`, by name (the
    names a tf.compat.v1.train.Saver writes, as the original restores with one)."""
    checkpoint = tf.train.latest_checkpoint(os.fspath(directory))
    if checkpoint is None:
        raise ValueError(
            f'No checkpoint found in "{os.fspath(directory)}" (checkpoint_restore_dir)'
        )
    reader = tf.train.load_checkpoint(checkpoint)
    for step in steps:
        for variable in step.variables:
            name = variable.name.split(":")[0]
            if not reader.has_tensor(name):
                raise ValueError(
                    f"The checkpoint {checkpoint} has no value for the variable {name!r} "
                    "(checkpoint_restore_dir)"
                )
            variable.assign(reader.get_tensor(name))


def run_variable_initializer(
    variable_initializer: Callable[[Any], Any], variables: Sequence[tf.Variable]
) -> None:
    """Calls `variable_initializer(session)` as the original does (r1.15 serving.py): with
    a `tf.compat.v1.Session` of a graph of its own, the default graph during the call,
    holding the steps' variables under their names, not yet initialized. What it gives
    them (`global_variables_initializer()`, a `Saver` restoring a checkpoint, assignments
    run in the session) becomes the variables' values, which the export freezes."""
    unique = list({id(v): v for v in variables}.values())
    current = [np.asarray(v.numpy()) for v in unique]
    graph = tf.Graph()
    with graph.as_default():
        mirrors = [
            tf.compat.v1.Variable(
                value,
                name=variable.name.split(":")[0],
                dtype=variable.dtype,
                trainable=variable.trainable,
                use_resource=True,
            )
            for variable, value in zip(unique, current, strict=True)
        ]
        initialized = [tf.compat.v1.is_variable_initialized(m) for m in mirrors]
        with tf.compat.v1.Session(graph=graph) as session:
            variable_initializer(session)
            flags = session.run(initialized)
            values = session.run([m for m, set_ in zip(mirrors, flags, strict=True) if set_])
    given = iter(values)
    for variable, set_ in zip(unique, flags, strict=True):
        if set_:  # left alone, a variable keeps the value it has
            variable.assign(next(given))
