"""Files that appear whole or not at all: written to a temporary file, then moved into place.

A reader (another process using the same executable cache, a server loading a model)
never sees half a file, even if the writer is killed; the temporary file is removed
when writing fails.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator


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


def write_bytes_atomically(path: str, data: bytes) -> None:
    with atomic_output(path) as stream:
        stream.write(data)


@contextlib.contextmanager
def atomic_directory(path: str) -> Iterator[str]:
    """A directory to fill, which becomes `path` (absent or empty) once complete."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    try:
        yield temporary
        os.chmod(temporary, 0o777 & ~_umask())
        if os.path.isdir(path):
            os.rmdir(path)  # empty (checked by the caller): os.replace needs it gone
        os.replace(temporary, path)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def _file_mode(path: str) -> int:
    """The replaced file's permissions, or those of a new file under the process's umask."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()
