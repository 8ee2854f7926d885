"""Variables exported from (and imported into) a live TF1 session or Keras model.

The original (tensorflow/compiler/plugin/poplar/tools/tensorflow_weights_extractor.py,
re-exported by tensorflow/python/ipu/utils.py) writes the variables as PopEF tensor data
for Graphcore's executable runner. There is no such runner here: the file is an engine
executable file (`engine/executable/executable_file.py`: one archive, written atomically,
checked when read) without a program, holding the values by variable name (TensorFlow's
name without its ":0", as the original's exporter names them) in a `variables.npz`
section. Importing sets every variable of the graph or model that a file holds a value
for and leaves the others, as the original's non-strict import does; a value of another
dtype or shape is refused with the original's InvalidArgumentError.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.engine.executable import executable_file
from openipu._src.engine.executable.signature import StreamSignature

KIND = "tensorflow-variables"
_SECTION = "variables.npz"
_NO_STREAMS = StreamSignature((), (), ())


def _name(variable: tf.Variable) -> str:
    name = variable.name
    return name[: -len(":0")] if name.endswith(":0") else name


def _values(variables: Sequence[tf.Variable], session: Any) -> list[np.ndarray]:
    if session is None:
        return [np.asarray(v.numpy()) for v in variables]
    return [np.asarray(value) for value in session.run(list(variables))]


def _check_metadata(gc_metadata: Any) -> None:
    """The original validates against a Poplar executable's metadata; here it must be readable."""
    if gc_metadata is None:
        return
    try:
        executable_file.read(gc_metadata)
    except executable_file.ExecutableFileError as error:
        raise tf.errors.InvalidArgumentError(
            None, None, f"gc_metadata must be an executable file written by openipu: {error}"
        ) from None


def export_variables(
    variables: Sequence[tf.Variable], session: Any, output_file: Any, gc_metadata: Any
) -> None:
    if not isinstance(output_file, (str, os.PathLike)):
        raise TypeError(f"output_file must be a path, got {type(output_file).__name__}")
    _check_metadata(gc_metadata)
    names = [_name(v) for v in variables]
    arrays = io.BytesIO()
    np.savez(arrays, **dict(zip(names, _values(variables, session), strict=True)))  # type: ignore[arg-type]
    directory = os.path.dirname(os.fspath(output_file))
    if directory:
        os.makedirs(directory, exist_ok=True)
    executable_file.write(
        output_file,
        executable_file.Executable(
            kind=KIND,
            program=None,
            signature=_NO_STREAMS,
            graph=None,
            sections={_SECTION: arrays.getvalue()},
            metadata={"variables": names},
        ),
    )


def read_values(data_files: Iterable[Any]) -> dict[str, np.ndarray]:
    """The values held by `data_files` (later files win for a name held twice)."""
    if isinstance(data_files, (str, os.PathLike)):
        data_files = [data_files]
    values: dict[str, np.ndarray] = {}
    for path in data_files:
        try:
            executable = executable_file.read(path)
        except executable_file.ExecutableFileError as error:
            raise tf.errors.InvalidArgumentError(None, None, str(error)) from None
        if executable.kind != KIND:
            raise tf.errors.InvalidArgumentError(
                None,
                None,
                f"{os.fspath(path)!r} holds a {executable.kind}, not variables written by "
                "export_variables_from_live_session/model",
            )
        with np.load(io.BytesIO(executable.sections[_SECTION])) as stored:
            values.update({name: stored[name] for name in stored.files})
    return values


def import_values(
    variables: Sequence[tf.Variable], session: Any, values: dict[str, np.ndarray]
) -> None:
    """Assigns each variable the value `values` holds under its name."""
    updates = []
    for variable in variables:
        name = _name(variable)
        if name not in values:
            continue
        value = values[name]
        dtype = variable.dtype.base_dtype
        shape = variable.shape
        if tf.as_dtype(value.dtype) != dtype or not shape.is_compatible_with(value.shape):
            raise tf.errors.InvalidArgumentError(
                None,
                None,
                f"For tensor {name} the tensorflow info ({dtype.name}, {shape}) doesn't match "
                f"the one from the file ({tf.as_dtype(value.dtype).name}, {list(value.shape)})",
            )
        updates.append((variable, value))
    if session is None:
        for variable, value in updates:
            variable.assign(value)
        return
    for variable, value in updates:
        variable.load(value, session)
