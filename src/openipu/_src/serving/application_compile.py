"""`ipu.application_compile_op`: compile a function into an executable file.

The executable (`engine/executable`) is the function's program frozen into a TensorFlow
graph with the engine's compile decisions; `embedded_runtime` runs it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.engine.executable import builder, executable_file


def experimental_application_compile_op(
    func: Callable[..., Any],
    inputs: Any = None,
    output_path: str | None = None,
    freeze_variables: bool = False,
    name: str | None = None,
) -> tf.Tensor:
    """Compiles `func(*inputs)` into an executable; returns its path as a string tensor.

    Eagerly the executable is written at once; in a graph (a `tf.function`, a TF1 session)
    when the returned tensor is evaluated, freezing the variables' values of that moment,
    as the original's op does when it runs.
    """
    if not callable(func):
        raise TypeError(f"func must be callable, got {func!r}")
    if inputs is None:
        inputs = []
    elif not isinstance(inputs, (list, tuple)):
        inputs = [inputs]  # as the original's _convert_to_list
    if name is None:
        name = "application_compile"
    made_here = output_path is None
    if output_path is None:
        # As the original: a temporary file of that prefix and suffix.
        handle, output_path = tempfile.mkstemp(prefix=name, suffix=".poplar_exec")
        os.close(handle)
    path = os.fspath(output_path)

    if tf.executing_eagerly():
        try:
            executable = builder.build(func, inputs, name, freeze_variables=freeze_variables)
            executable_file.write(path, executable)
        except BaseException:
            if made_here:  # no empty file of ours is left behind by a failed compile
                _remove_quietly(path)
            raise
        return tf.constant(path.encode())
    # In a graph the function is traced now, and frozen when the op runs, with the values
    # its variables then have (read by the graph, handed to the op). Constant inputs are
    # baked in, the others are the executable's start-up inputs (the original's
    # `constant_indices`, ops/application_compile_op.py).
    arguments = [_argument(tf.convert_to_tensor(value)) for value in inputs]
    traced = builder.trace(func, arguments, name)
    captured = traced.captured_values()

    def compile_now(*values: tf.Tensor) -> bytes:
        given = {key: value.numpy() for (key, _), value in zip(captured, values, strict=True)}
        try:
            executable = builder.finish(traced, freeze_variables, given=given)
            executable_file.write(path, executable)
        except BaseException:
            if made_here and os.path.isfile(path) and not os.path.getsize(path):
                _remove_quietly(path)
            raise
        return path.encode()

    result = tf.py_function(compile_now, [tensor for _, tensor in captured], tf.string, name=name)
    result.set_shape([])
    return result


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _argument(tensor: tf.Tensor) -> builder.Argument:
    if tensor.op.type == "Const":
        return np.asarray(tf.get_static_value(tensor))
    return tf.TensorSpec(tensor.shape, tensor.dtype)
