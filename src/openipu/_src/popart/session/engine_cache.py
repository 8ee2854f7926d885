"""PopART's engine cache: `SessionOptions.enableEngineCaching` with `cachePath`.

On the IPU, a session whose executable is in the cache loads it instead of compiling. Here
a session's compiling is choosing and building its executor: the TensorFlow lowering under
XLA or as a graph, or onnxruntime, whichever ran the model faster when it was measured (an
inference session runs both and times them). The cache keeps that decision, the
session's `CompiledProgram`, in an engine executable file per program: a later session of
the same model and settings (in any process) builds only the executor the entry names,
without measuring again; one whose entry names onnxruntime compiles no TensorFlow program
at all.

An entry's key covers the model without its weight values and the session settings (the
fingerprint `compileAndExport` also records), the device, the openipu and TensorFlow
versions, and `OPENIPU_COMPILE`. A damaged entry, or one of another program, is removed with a warning
and the session compiles again; entries are written atomically, so sessions writing the
same entry at once leave a valid one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os

from openipu._src.engine import compile_policy
from openipu._src.engine.compiled_program import CompiledProgram
from openipu._src.engine.executable import versions
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.session import executable_file

logger = logging.getLogger(__name__)


def entry_path(cache_path: str, fingerprint: str, device: str = "") -> str:
    """Where the entry of the program with `fingerprint` for `device` lives in `cache_path`."""
    key = {
        "fingerprint": fingerprint,
        "device": device,  # what fits on one chip may not fit on another (the cost model)
        "versions": versions.current(),
        "compile": os.environ.get(compile_policy.COMPILE_MODE_ENV, "auto"),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return os.path.join(cache_path, f"engine_{digest[:40]}.popef")


def load(path: str, fingerprint: str) -> CompiledProgram | None:
    """The cached decisions at `path`, or None (no entry; a damaged or foreign one, which
    is removed with a warning)."""
    if not os.path.exists(path):
        return None
    try:
        artifact = executable_file.read_artifact(path)
        if artifact.kind != "executable" or artifact.program is None:
            raise popart_exception(f"{path} holds no compiled program")
        if artifact.fingerprint != fingerprint:
            raise popart_exception(f"{path} was compiled for another program")
    except popart_exception as error:
        logger.warning(
            "The engine cache entry %s cannot be used (%s): it is removed and the session "
            "compiles again",
            path,
            error,
        )
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return None
    return artifact.program


def store(path: str, fingerprint: str, name: str, program: CompiledProgram) -> None:
    """Writes the entry (atomically); a cache that cannot be written only costs a warning."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        executable_file.write_artifact(
            path, executable_file.SessionArtifact("executable", fingerprint, name, program=program)
        )
    except OSError as error:
        logger.warning("Cannot write the engine cache entry %s: %s", path, error)
