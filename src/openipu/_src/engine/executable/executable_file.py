"""The executable file: one zip archive (stored, not compressed) holding

    manifest.json   format and version, kind, the CompiledProgram record, the stream
                    signature, the graph's input and output tensors, the openipu and
                    TensorFlow versions that wrote it, and a SHA-256 of every section
    program.pb      the program as a frozen TensorFlow GraphDef (`program_graph`)
    <section>       what a front end keeps beside it (PopART: the ONNX model, weights),
                    and the program's own state (`program_state`) when it has some

The original writes PopEF files holding a Poplar executable; there is none here, so the
file holds what the engine needs to run the same program without compiling it again.
Anything else (a truncated or corrupted file, another program's file, a newer format)
is refused with an error naming the file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import zipfile
from typing import Any

from openipu._src.engine.compiled_program import CompiledProgram
from openipu._src.engine.executable import atomic_files, run_steps, versions
from openipu._src.engine.executable.program_graph import FrozenGraph
from openipu._src.engine.executable.signature import StreamSignature

FORMAT = "openipu-executable"
VERSION = 1
_MANIFEST = "manifest.json"
_PROGRAM = "program.pb"


class ExecutableFileError(RuntimeError):
    """A file that is not a readable executable. A RuntimeError, as the original's PopEF
    reader raises (popef.Reader.parseFile, read by ops/embedded_runtime.py)."""


@dataclasses.dataclass(frozen=True)
class Executable:
    """A compiled program as written to (and read from) an executable file."""

    kind: str  # what wrote it: "application" (application_compile_op), "popart-executable", ...
    program: CompiledProgram | None  # None: a file of values only (PopART's saveVariables)
    signature: StreamSignature
    graph: FrozenGraph | None  # None: a front end that keeps its program in its sections
    sections: dict[str, bytes] = dataclasses.field(default_factory=dict)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    written_by: dict[str, str] = dataclasses.field(default_factory=lambda: dict(versions.current()))

    @property
    def iterations(self) -> int:
        """Streamed elements per run of the program (its steps per call)."""
        return 1 if self.program is None else self.program.steps_per_call

    @property
    def elements_per_run(self) -> int:
        """Streamed elements a run takes: each step may read several (`run_steps.py`)."""
        return self.iterations * int(self.metadata.get(run_steps.READS_PER_STEP_KEY, 1))


def to_bytes(executable: Executable) -> bytes:
    sections = dict(executable.sections)
    if _MANIFEST in sections or _PROGRAM in sections:
        raise ValueError(f"Section names {_MANIFEST!r} and {_PROGRAM!r} are the file's own")
    if executable.graph is not None:
        sections[_PROGRAM] = executable.graph.graph_def
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "kind": executable.kind,
        "program": None if executable.program is None else executable.program.to_dict(),
        "signature": executable.signature.to_dict(),
        "graph_inputs": list(executable.graph.inputs) if executable.graph else None,
        "graph_outputs": list(executable.graph.outputs) if executable.graph else None,
        "metadata": executable.metadata,
        "written_by": executable.written_by,
        "sections": {name: hashlib.sha256(data).hexdigest() for name, data in sections.items()},
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(_MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
        for name, data in sorted(sections.items()):
            archive.writestr(name, data)
    return buffer.getvalue()


def write(path: str | os.PathLike[str], executable: Executable) -> None:
    """Writes `executable` to `path` atomically (a reader never sees part of it)."""
    path = os.fspath(path)
    try:
        atomic_files.write_bytes_atomically(path, to_bytes(executable))
    except OSError as error:
        # The original op's words (its application_compile_test.py matches them).
        raise OSError(
            error.errno, f"Failed to open file for writing: {path!r} ({error.strerror})"
        ) from error


def read(path: str | os.PathLike[str]) -> Executable:
    """The executable in `path`; ExecutableFileError naming the file if it holds none."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as error:
        raise ExecutableFileError(
            f"Cannot open the executable file {path!r}: {error.strerror}"
        ) from None
    return from_bytes(data, path)


def from_bytes(data: bytes, path: str) -> Executable:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            manifest = json.loads(archive.read(_MANIFEST))
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise ExecutableFileError(f"{path!r} is not an openipu executable file")
            if manifest.get("version") != VERSION:
                raise ExecutableFileError(
                    f"{path!r} is an executable of format version {manifest.get('version')!r}; "
                    f"this openipu reads version {VERSION}"
                )
            sections = {name: archive.read(name) for name in manifest["sections"]}
    except ExecutableFileError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, EOFError) as error:
        # A truncated or damaged archive, or a foreign file (zipfile checks every CRC).
        raise ExecutableFileError(
            f"{path!r} is not a valid openipu executable file (truncated, corrupted or of "
            f"another program): {error}"
        ) from None
    for name, digest in manifest["sections"].items():
        if hashlib.sha256(sections[name]).hexdigest() != digest:
            raise ExecutableFileError(f"{path!r} is corrupted: its section {name!r} changed")
    try:
        graph_data = sections.pop(_PROGRAM, None)
        graph = None
        if graph_data is not None:
            graph = FrozenGraph(
                graph_data, tuple(manifest["graph_inputs"]), tuple(manifest["graph_outputs"])
            )
        return Executable(
            kind=str(manifest["kind"]),
            program=(
                None
                if manifest["program"] is None
                else CompiledProgram.from_dict(manifest["program"])
            ),
            signature=StreamSignature.from_dict(manifest["signature"]),
            graph=graph,
            sections=sections,
            metadata=dict(manifest.get("metadata") or {}),
            written_by=dict(manifest.get("written_by") or {}),
        )
    except (KeyError, ValueError, TypeError) as error:
        raise ExecutableFileError(f"{path!r} has an invalid manifest: {error!r}") from None
