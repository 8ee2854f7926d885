"""The files sessions write: executables and variables, in the engine's executable format.

The original writes PopEF files holding a Poplar executable. Here a session's executable is
an engine executable file (`engine/executable/executable_file.py`: one archive, written
atomically, checked when read) holding the compile decisions of the session's program
(its `CompiledProgram`, once compiled) and what the session needs to run the same program
again, as sections:

    model.onnx      the model, weights included (executables with saveVariables)
    variables.npz   the weights by tensor id (variables files, and executables)

and, in its metadata, the fingerprint of what was compiled and the session's name. The
same format serves TensorFlow's executables (application_compile_op, serving), so one
reader refuses damaged or foreign files for both.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from openipu._src.engine.compiled_program import CompiledProgram
from openipu._src.engine.executable import executable_file as engine_file
from openipu._src.engine.executable.atomic_files import atomic_output, write_bytes_atomically
from openipu._src.engine.executable.signature import StreamSignature
from openipu._src.popart.builder.builder_debug_info import strip_debug_ids
from openipu._src.popart.errors import OptionTypeError, popart_exception

__all__ = ["atomic_output", "write_bytes_atomically"]

EXECUTABLE_FILE_NAME = "executable.popef"
VARIABLES_FILE_NAME = "variables.popef"
_KINDS = {"executable": "popart-executable", "variables": "popart-variables"}
_NO_STREAMS = StreamSignature((), (), ())


def resolve_path(path: str, default_name: str) -> str:
    """`path` itself, or `<path>/<default_name>` when `path` is a directory."""
    path = _file_name(path)
    return os.path.join(path, default_name) if os.path.isdir(path) else path


def model_fingerprint(model: onnx.ModelProto, settings: dict[str, Any]) -> str:
    """What identifies a compiled program: the model without weight values, and the settings.

    Weights do not take part, as in the original: an executable runs with new weights.
    """
    structure = onnx.ModelProto()
    structure.CopyFrom(model)
    strip_debug_ids(structure)
    for tensor in structure.graph.initializer:
        for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
            tensor.ClearField(name)
        tensor.ClearField("uint64_data")
        tensor.ClearField("string_data")
    digest = hashlib.sha256(structure.SerializeToString(deterministic=True))
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


@dataclass
class SessionArtifact:
    kind: str  # "executable" or "variables"
    fingerprint: str
    name: str
    model: bytes | None = None
    variables: dict[str, np.ndarray] = field(default_factory=dict)
    program: CompiledProgram | None = None  # the compile decisions (executables, once compiled)


def write_artifact(path: str, artifact: SessionArtifact) -> None:
    sections = {}
    if artifact.model is not None:
        sections["model.onnx"] = artifact.model
    if artifact.variables:
        arrays = io.BytesIO()
        # numpy's stub lets the ** names reach savez's allow_pickle parameter.
        np.savez(arrays, **artifact.variables)  # type: ignore[arg-type]
        sections["variables.npz"] = arrays.getvalue()
    executable = engine_file.Executable(
        kind=_KINDS[artifact.kind],
        program=artifact.program,
        signature=_NO_STREAMS,
        graph=None,
        sections=sections,
        metadata={"fingerprint": artifact.fingerprint, "name": artifact.name},
    )
    engine_file.write(path, executable)


def _file_name(path: object) -> str:
    """A `const std::string &` argument of the original's bindings: pybind11 takes a str or
    bytes and refuses anything else with a TypeError (python/popart/popart_core/popart.cpp)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise OptionTypeError(f"A file name must be a str, got {path!r} ({type(path).__name__})")
    return os.fsdecode(path)


def read_artifact(path: str) -> SessionArtifact:
    path = _file_name(path)
    if not os.path.isfile(path):
        raise popart_exception(f"Could not open file {path}")
    try:
        executable = engine_file.read(path)
    except engine_file.ExecutableFileError as error:
        raise popart_exception(
            f"{os.fspath(path)} is not an executable written by compileAndExport, "
            f"saveExecutable or saveVariables: {error}"
        ) from None
    kinds = {value: key for key, value in _KINDS.items()}
    if executable.kind not in kinds:
        raise popart_exception(
            f"{os.fspath(path)} is not an executable written by compileAndExport, saveExecutable "
            f"or saveVariables: it holds a {executable.kind!r} executable (of TensorFlow)"
        )
    variables = {}
    if "variables.npz" in executable.sections:
        try:
            with np.load(
                io.BytesIO(executable.sections["variables.npz"]), allow_pickle=False
            ) as npz:
                variables = {name: npz[name] for name in npz.files}
        except (ValueError, OSError) as error:
            raise popart_exception(
                f"{os.fspath(path)} holds unreadable variables: {error}"
            ) from None
    return SessionArtifact(
        kinds[executable.kind],
        str(executable.metadata.get("fingerprint", "")),
        str(executable.metadata.get("name", "")),
        executable.sections.get("model.onnx"),
        variables,
        executable.program,
    )
