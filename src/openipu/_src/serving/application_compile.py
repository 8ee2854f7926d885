"""`ipu.application_compile_op`: compile a function into an executable file.

The executable (`engine/executable`) is the function's program frozen into a TensorFlow
graph with the engine's compile decisions; `embedded_runtime` runs it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

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
    if output_path is None:
        # As the original: a temporary file of that prefix and suffix.
        handle, output_path = tempfile.mkstemp(prefix=name, suffix=".poplar_exec")
        os.close(handle)
    path = os.fspath(output_path)

    def compile_now(*values: Any) -> bytes:
        executable = builder.build(func, list(values), name, freeze_variables=freeze_variables)
        executable_file.write(path, executable)
        return path.encode()

    if tf.executing_eagerly():
        return tf.constant(compile_now(*inputs))
    # Run when the op runs, with the values its inputs then have.
    result = tf.py_function(compile_now, list(inputs), tf.string, name=name)
    result.set_shape([])
    return result
