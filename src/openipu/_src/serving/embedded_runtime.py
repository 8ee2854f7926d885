"""`ipu.embedded_runtime`: run an executable from TensorFlow (eagerly, in a tf.function or
in a TF1 session), from any number of threads.

`embedded_runtime_start` loads the executable file and starts an engine instance under
its name (`runtime_instance`); `embedded_runtime_call` hands one streamed element to it
and returns that element's results. Argument checks and their messages follow the
original (tensorflow/python/ipu/ops/embedded_runtime.py).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.engine.executable import executable_file
from openipu._src.engine.executable.executable_file import Executable
from openipu._src.engine.executable.signature import StreamSignature, TensorSignature
from openipu._src.serving.runtime_instance import RuntimeInstance

#: The original's default timeout, in microseconds.
DEFAULT_TIMEOUT_US = 5000

_instances: dict[str, RuntimeInstance] = {}
_instances_lock = threading.Lock()


class RuntimeContext:
    """Represents an instance of the application runtime; made by `embedded_runtime_start`."""

    def __init__(
        self, name: str, executable_file: Any, executable_proto: Executable, start_output: Any
    ) -> None:
        self._name = name
        self._executable_file = executable_file
        self._executable_proto = executable_proto
        self._start_output = start_output
        #: Start-up inputs a graph computes when it runs (fed placeholders), else empty.
        self._inputs_at_run: list[tf.Tensor] = []

    def start_output(self) -> Any:
        """The output of the start op (a token calls depend on)."""
        return self._start_output

    def name(self) -> str:
        """The name of the application runtime instance."""
        return self._name

    def signature(self) -> StreamSignature:
        """The executable's signature: `inputs`, `streamed_inputs`, `streamed_outputs`."""
        return self._executable_proto.signature

    def output_types(self) -> list[tf.DType]:
        """The dtypes of the executable's streamed outputs."""
        return [s.tf_dtype for s in self.signature().streamed_outputs]


def _path_of(executable_file: Any) -> str:
    if isinstance(executable_file, (str, bytes, os.PathLike)):
        path = os.fsdecode(executable_file)
    else:
        tensor = tf.convert_to_tensor(executable_file, dtype=tf.string)
        value = tf.get_static_value(tensor)
        if value is None:
            raise ValueError(
                "executable_file must be a path known when the runtime starts (a string or a "
                f"constant string tensor), got {executable_file!r}"
            )
        path = os.fsdecode(value)
    return path


def embedded_runtime_start(
    executable_file: Any, inputs: Any, name: str, timeout: int | None = None
) -> RuntimeContext:
    """Loads `executable_file` and starts the runtime instance `name` with `inputs`.

    `timeout` (microseconds, default 5000): how long a pipelined executable waits for
    more calls before it runs on dummy data (a plain loop runs each call's step as it
    comes: see runtime_instance.py).
    """
    path = _path_of(executable_file)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
        # The original hands it to its op's int attribute, which refuses other types.
        raise TypeError(f"timeout must be an int (microseconds), got {timeout!r}")
    if timeout is not None and timeout < 0:
        raise ValueError(f"timeout must be a non-negative number of microseconds, got {timeout}")
    timeout = timeout or DEFAULT_TIMEOUT_US
    executable = executable_file_read(path)
    expected = executable.signature.inputs
    if isinstance(inputs, dict):
        missing = [s.name for s in expected if s.name not in inputs]
        if missing:
            raise Exception(  # noqa: TRY002 - the original's type
                f"Failed to find input tensor with name '{missing[0]}' in input dictionary."
            )
        inputs = [inputs[s.name] for s in expected]
    if isinstance(inputs, tuple):
        inputs = list(inputs)
    if not isinstance(inputs, list):
        raise Exception("Expected the inputs to be a list.")  # noqa: TRY002 - the original's
    if len(expected) != len(inputs):
        raise Exception(  # noqa: TRY002
            f"Embedded application runtime expects {len(expected)} inputs, but {len(inputs)} "
            "were provided."
        )
    _check_tensors(inputs, expected, Exception)
    values = [_host_value(v) for v in inputs]
    known = [
        np.zeros(s.shape, s.dtype) if v is None else v
        for v, s in zip(values, expected, strict=True)
    ]
    instance = RuntimeInstance(path, executable, known, timeout)
    with _instances_lock:
        _instances[name] = instance
    context = RuntimeContext(name, executable_file, executable, tf.constant(name))
    if any(v is None for v in values):
        # Tensors known only when the graph runs (fed placeholders): each call takes them.
        context._inputs_at_run = [tf.convert_to_tensor(v) for v in inputs]  # noqa: SLF001
    return context


def executable_file_read(path: str) -> Executable:
    executable = executable_file.read(path)
    if executable.graph is None or executable.program is None:
        raise executable_file.ExecutableFileError(
            f"{path!r} holds a {executable.kind} executable, which the embedded runtime cannot run"
        )
    return executable


def _host_value(value: Any) -> np.ndarray | None:
    """The value of a start-up input, or None for a graph tensor known only when it runs."""
    if isinstance(value, tf.Tensor) and not hasattr(value, "numpy"):
        static = tf.get_static_value(value)
        return None if static is None else np.asarray(static)
    return np.asarray(value)


def _check_tensors(
    values: list[Any], expected: tuple[TensorSignature, ...], dtype_error: type[Exception]
) -> None:
    for i, (value, spec) in enumerate(zip(values, expected, strict=True)):
        shape = list(getattr(value, "shape", np.shape(value)))
        if shape != list(spec.shape):
            raise Exception(  # noqa: TRY002 - the original's type
                f"Mismatched input shape at position {i} ('{spec.name}'). Expected "
                f"{list(spec.shape)}, but input {i} has shape {shape}."
            )
        dtype = value.dtype if hasattr(value, "dtype") else tf.convert_to_tensor(value).dtype
        if tf.as_dtype(dtype) != spec.tf_dtype:
            # The value's own dtype in the message (numpy's `int32`, TensorFlow's
            # `<dtype: 'int32'>`), as the original's.
            raise dtype_error(
                f"Mismatched input dtype at position {i} ('{spec.name}'). Expected "
                f"{spec.tf_dtype}, but input {i} has dtype {dtype}."
            )


def _instance(context: RuntimeContext) -> RuntimeInstance:
    with _instances_lock:
        instance = _instances.get(context.name())
    if instance is None:
        raise ValueError(f"No embedded runtime named {context.name()!r} was started")
    return instance


def embedded_runtime_call(inputs: Any, context: RuntimeContext) -> list[tf.Tensor]:
    """Runs one batch of streamed inputs on the runtime; returns the outputs."""
    expected = context.signature().streamed_inputs
    inputs = list(inputs)
    if len(inputs) != len(expected):
        raise Exception(  # noqa: TRY002 - the original's type
            f"Embedded application call expects {len(expected)} inputs, but {len(inputs)} were "
            "provided."
        )
    # As the original: a wrong shape is an Exception, a wrong dtype a TypeError.
    _check_tensors(inputs, expected, TypeError)
    instance = _instance(context)
    outputs = context.signature().streamed_outputs
    if tf.executing_eagerly():
        results = instance.call([np.asarray(v) for v in inputs])
        return [tf.convert_to_tensor(r) for r in results]

    at_run = context._inputs_at_run  # noqa: SLF001

    def run(*values: tf.Tensor) -> list[np.ndarray]:
        arrays = [v.numpy() for v in values]
        if at_run:
            instance.set_inputs(arrays[: len(at_run)])
        return instance.call(arrays[len(at_run) :])

    # py_function: its Python runs eagerly, in TF1 sessions too.
    results = tf.py_function(
        run,
        [*at_run, *(tf.convert_to_tensor(v) for v in inputs)],
        [s.tf_dtype for s in outputs],
    )
    for tensor, spec in zip(results, outputs, strict=True):
        tensor.set_shape(spec.shape)
    return list(results)


def embedded_runtime_stop(context: RuntimeContext) -> None:
    """Not supported, as in the original."""
    raise NotImplementedError("Embedded runtime doesn't support stopping an engine.")


def embedded_runtime_start_and_call(
    executable_file: Any, startup_inputs: Any, call_inputs: Any, name: str
) -> tuple[list[tf.Tensor], RuntimeContext]:
    """Starts the runtime and calls it once; returns (the call's outputs, the context)."""
    context = embedded_runtime_start(executable_file, startup_inputs, name)
    return embedded_runtime_call(call_inputs, context), context
