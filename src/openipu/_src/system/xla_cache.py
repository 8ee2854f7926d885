"""The executable cache of TensorFlow programs: `TF_POPLAR_FLAGS=--executable_cache_path=DIR`.

On the IPU, a program whose executable is in the cache is loaded instead of compiled. Here
the compiling is XLA's: with the flag set, TensorFlow's persistent XLA cache keeps every
compiled region's executable in `DIR/xla-tf<version>-openipu<version>/`, keyed by
TensorFlow with a fingerprint of the program (its HLO, which the IPU options that change
numbers change too), so a second process running the same program skips XLA's compiling.
The directory names the versions: entries of another TensorFlow or openipu are never read.

TensorFlow fails a program whose entry is damaged, so each process checks the entries
when it starts (each must parse as a protocol buffer and match the checksum recorded for
it) and removes a damaged one with a warning: it is compiled again. The checksums are
recorded at a process's exit, for each entry whose file (inode) has none yet: an entry
that was there at start passed that check, and one that came during the process's life
was renamed into place whole by TensorFlow (by this process or one running beside it).
So a copy of the cache (new inodes) keeps its checksums valid, a bit flipped in any copy
is found, and processes writing the same entry at once leave one entry whose checksum
the last of them to exit records. TensorFlow writes each entry to a temporary file and
renames it; checksums are written the same way.

TensorFlow reads the flag when its runtime starts, so this is set up before (when an IPU
module is imported, `host_devices.ensure_logical_devices`).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.metadata
import logging
import os
import tempfile

import tensorflow as tf
from google.protobuf import empty_pb2, message
from google.protobuf.unknown_fields import UnknownFieldSet

from openipu._src.config import poplar_flags

logger = logging.getLogger(__name__)

_XLA_FLAGS = "TF_XLA_FLAGS"
_PERSISTENT_CACHE_FLAG = "--tf_xla_persistent_cache_directory"
_CHECKSUM_SUFFIX = ".sha256"
#: The fields of TensorFlow's XlaSerializedCacheEntry that an entry must hold: its key and
#: its executable.
_REQUIRED_FIELDS = {1, 3}


_started_with: list[str | None] = []  # the cache path when TensorFlow's runtime started
_late_paths_warned: set[str] = set()


def _requested_path() -> str | None:
    try:
        path = poplar_flags.value("executable_cache_path")
    except ValueError:
        return None  # flags the original refuses: configure_ipu_system reports them
    return str(path) if path else None


def warn_if_set_late() -> None:
    """A cache path set after the runtime started cannot reach TensorFlow: says so, once.

    The original reads its flags when its backend first compiles; TensorFlow reads the XLA
    cache's flag once, when its runtime starts (here on importing the IPU module).
    """
    path = _requested_path()
    if not _started_with or path is None or path == _started_with[0]:
        return
    if path not in _late_paths_warned:
        _late_paths_warned.add(path)
        logger.warning(
            "TF_POPLAR_FLAGS --executable_cache_path=%s was set after TensorFlow's runtime "
            "started (on importing the IPU module): programs of this process are compiled "
            "without that cache. Set it in the environment before the import.",
            path,
        )


def configure() -> str | None:
    """Turns the XLA cache on if `--executable_cache_path` is set; returns its directory."""
    path = _requested_path()
    _started_with[:] = [path]
    if not path:
        return None
    directory = os.path.join(os.path.abspath(path), versioned_name())
    os.makedirs(directory, exist_ok=True)
    remove_damaged_entries(directory)
    flags = os.environ.get(_XLA_FLAGS, "")
    if _PERSISTENT_CACHE_FLAG not in flags:
        os.environ[_XLA_FLAGS] = f"{flags} {_PERSISTENT_CACHE_FLAG}={directory}".strip()
    atexit.register(record_checksums, directory)
    return directory


def versioned_name() -> str:
    try:
        openipu_version = importlib.metadata.version("openipu")
    except importlib.metadata.PackageNotFoundError:  # a source tree
        openipu_version = "source"
    return f"xla-tf{tf.__version__}-openipu{openipu_version}"


def _entries(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(os.path.join(directory, n) for n in names if n.endswith(".pb"))


def _damage(path: str) -> str | None:
    """Why the entry at `path` cannot be used, or None if it can."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    reason = _structure_damage(data)
    if reason is not None:
        return reason
    recorded = _recorded(path)
    if recorded is None:
        return None  # not seen whole by a process yet: the structure check is all there is
    # Compared whatever file (inode) the checksum was recorded for: a copy of the cache
    # keeps its entries' bytes. A process still running that renamed its own whole entry
    # over one already checksummed is the one false alarm: it costs a compile, no more.
    if not recorded or recorded[0] != hashlib.sha256(data).hexdigest():
        return "does not match the checksum recorded when it was written (corrupted)"
    return None


def _structure_damage(data: bytes) -> str | None:
    """Why `data` is not a whole cache entry, or None if it is."""
    entry = empty_pb2.Empty()
    try:
        entry.ParseFromString(data)
    except message.DecodeError:
        return "is not a complete protocol buffer (truncated or corrupted)"
    if not _REQUIRED_FIELDS <= {field.field_number for field in UnknownFieldSet(entry)}:
        return "lacks its key or its executable"
    return None


def _recorded(path: str) -> list[str] | None:
    """The checksum file's words (checksum, inode) for the entry at `path`; None without one."""
    try:
        with open(path + _CHECKSUM_SUFFIX) as stream:
            return stream.read().split()
    except OSError:
        return None


def remove_damaged_entries(directory: str) -> list[str]:
    """Removes (with a warning) the entries TensorFlow could not load; returns their paths."""
    removed = []
    for path in _entries(directory):
        reason = _damage(path)
        if reason is None:
            continue
        logger.warning(
            "The executable cache entry %s %s: it is removed, and its program compiled again",
            path,
            reason,
        )
        for stale in (path, path + _CHECKSUM_SUFFIX):
            try:
                os.remove(stale)
            except FileNotFoundError:
                pass  # another process removed it first
        removed.append(path)
    return removed


def record_checksums(directory: str) -> None:
    """Records the checksum of each whole entry whose file has none (at the process's exit)."""
    for path in _entries(directory):
        for _ in range(3):  # again if another process renamed its entry in meanwhile
            if not _record_checksum(directory, path):
                break


def _record_checksum(directory: str, path: str) -> bool:
    """Records the checksum of the whole entry at `path` unless its file has one; returns
    whether it wrote one."""
    recorded = _recorded(path)
    try:
        if recorded is not None and recorded[1:] == [str(os.stat(path).st_ino)]:
            return False
        with open(path, "rb") as stream:
            data = stream.read()
            inode = str(os.fstat(stream.fileno()).st_ino)  # of the file just read
    except OSError:
        return False  # removed by another process meanwhile
    if _structure_damage(data) is not None:
        return False
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        with os.fdopen(handle, "w") as stream:
            stream.write(f"{hashlib.sha256(data).hexdigest()} {inode}")
        os.replace(temporary, path + _CHECKSUM_SUFFIX)
    except OSError as error:
        logger.info("Cannot record the checksum of %s: %s", path, error)
        if temporary is not None and os.path.exists(temporary):
            os.remove(temporary)
        return False
    return True
