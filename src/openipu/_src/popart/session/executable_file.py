"""The files sessions write: executables, variables and ONNX models, written atomically.

The original writes PopEF files holding a Poplar executable. There is no Poplar executable
here, so an "executable" is what a session needs to rebuild the same program: the ONNX model
(with its weights), a fingerprint of what was compiled, and the session's settings. It is a
zip archive:

    manifest.json   format, version, kind ("executable" or "variables"), fingerprint, name
    model.onnx      the model, weights included (executables with saveVariables)
    variables.npz   the weights by tensor id (variables files, and executables)

Every file is written to a temporary file in the target's directory and moved into place
with `os.replace`, so a reader never sees half a file, even if the writer is killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from openipu._src.popart.errors import popart_exception

FORMAT = "openipu-popart-executable"
VERSION = 1
EXECUTABLE_FILE_NAME = "executable.popef"
VARIABLES_FILE_NAME = "variables.popef"


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[io.BufferedWriter]:
    """A binary file that replaces `path` only once it is completely written."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        # mkstemp's file is private (0600): give it the mode open() would have.
        os.chmod(temporary, _file_mode(path))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def _file_mode(path: str) -> int:
    """The replaced file's permissions, or those of a new file under the process's umask."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
        os.umask(mask)
        return 0o666 & ~mask


def write_bytes_atomically(path: str, data: bytes) -> None:
    with atomic_output(path) as stream:
        stream.write(data)


def resolve_path(path: str, default_name: str) -> str:
    """`path` itself, or `<path>/<default_name>` when `path` is a directory."""
    if not isinstance(path, (str, os.PathLike)):
        raise popart_exception(f"A file name must be a str, got {path!r}")
    path = os.fspath(path)
    return os.path.join(path, default_name) if os.path.isdir(path) else path


def model_fingerprint(model: onnx.ModelProto, settings: dict[str, Any]) -> str:
    """What identifies a compiled program: the model without weight values, and the settings.

    Weights do not take part, as in the original: an executable runs with new weights.
    """
    structure = onnx.ModelProto()
    structure.CopyFrom(model)
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


def write_artifact(path: str, artifact: SessionArtifact) -> None:
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "kind": artifact.kind,
        "fingerprint": artifact.fingerprint,
        "name": artifact.name,
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest, indent=1))
        if artifact.model is not None:
            archive.writestr("model.onnx", artifact.model)
        if artifact.variables:
            arrays = io.BytesIO()
            # numpy's stub lets the ** names reach savez's allow_pickle parameter.
            np.savez(arrays, **artifact.variables)  # type: ignore[arg-type]
            archive.writestr("variables.npz", arrays.getvalue())
    try:
        write_bytes_atomically(path, buffer.getvalue())
    except OSError as error:
        raise OSError(error.errno, f"Cannot write {path!r}: {error.strerror}") from error


def read_artifact(path: str) -> SessionArtifact:
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise popart_exception(f"Could not open file {path}")
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = json.loads(archive.read("manifest.json"))
            names = set(archive.namelist())
            model = archive.read("model.onnx") if "model.onnx" in names else None
            variables = {}
            if "variables.npz" in names:
                with np.load(io.BytesIO(archive.read("variables.npz")), allow_pickle=False) as npz:
                    variables = {name: npz[name] for name in npz.files}
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
        raise popart_exception(
            f"{path} is not an executable written by compileAndExport, saveExecutable or "
            f"saveVariables: {error}"
        ) from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise popart_exception(
            f"{path} is not an openipu PopART executable (format {manifest.get('format')!r}, "
            f"version {manifest.get('version')!r})"
        )
    return SessionArtifact(
        manifest["kind"], manifest["fingerprint"], manifest.get("name", ""), model, variables
    )
