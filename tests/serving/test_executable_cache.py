"""The executable cache of TensorFlow programs (`TF_POPLAR_FLAGS=--executable_cache_path`):
processes running the same program share compiled executables; damaged entries are
compiled again; processes writing the same entry at once leave a valid cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import ipu

from openipu._src.system import xla_cache

PROGRAM = """
import numpy as np
import tensorflow as tf
from tensorflow.python import ipu

config = ipu.config.IPUConfig()
config.auto_select_ipus = 1
config.configure_ipu_system()
strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():

    @tf.function(jit_compile=True)
    def program(x):
        return tf.reduce_sum(tf.tanh(tf.matmul(x, x, transpose_b=True)), axis=1)

    x = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4) / 10.0)
    print("RESULT=" + ",".join(f"{v:.6f}" for v in strategy.run(program, args=(x,)).numpy()))
"""


def _expected() -> np.ndarray:
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10.0
    return np.tanh(x @ x.T).sum(axis=1)


def _start(cache, program: str = PROGRAM) -> subprocess.Popen:
    env = dict(os.environ, TF_POPLAR_FLAGS=f"--executable_cache_path={cache}")
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return subprocess.Popen(
        [sys.executable, "-c", program],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen) -> tuple[np.ndarray, str]:
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    line = [x for x in stdout.splitlines() if x.startswith("RESULT=")][-1]
    return np.array([float(v) for v in line[len("RESULT=") :].split(",")]), stderr


def _entries(cache) -> list[str]:
    directory = os.path.join(cache, xla_cache.versioned_name())
    return sorted(n for n in os.listdir(directory) if n.endswith(".pb"))


@pytest.fixture(scope="module")
def _first_run(tmp_path_factory):
    """One process's run of PROGRAM into a fresh cache (a process costs a TensorFlow start
    and a compile, so the tests share it): its result and its cache."""
    cache = tmp_path_factory.mktemp("first_run")
    result, _ = _finish(_start(cache))
    return result, cache


@pytest.fixture
def first_cache(_first_run, tmp_path):
    """`tmp_path` holding the first process's entries (modification times kept), with
    checksums recorded as a process records them at its exit: a checksum names its entry's
    inode, which a copy does not keep."""
    directory = tmp_path / xla_cache.versioned_name()
    directory.mkdir()
    for name in _entries(_first_run[1]):
        shutil.copy2(_first_run[1] / xla_cache.versioned_name() / name, directory / name)
    xla_cache.record_checksums(str(directory))
    return tmp_path


@pytest.mark.slow
def test_a_second_process_uses_the_first_ones_executable(_first_run, first_cache):
    first, first_dir = _first_run
    entries = _entries(first_dir)
    assert entries, "the first process left no executable in the cache"
    # The first process recorded each entry's checksum.
    assert all((first_dir / xla_cache.versioned_name() / (n + ".sha256")).exists() for n in entries)
    tmp_path = first_cache
    assert _entries(tmp_path) == entries
    directory = tmp_path / xla_cache.versioned_name()
    mtimes = {name: os.path.getmtime(directory / name) for name in entries}
    second, _ = _finish(_start(tmp_path))
    np.testing.assert_allclose(first, _expected(), rtol=1e-5)
    np.testing.assert_allclose(second, first, rtol=0)
    # Loaded, not written again; each entry has its checksum.
    assert {name: os.path.getmtime(directory / name) for name in entries} == mtimes
    assert all((directory / (name + ".sha256")).exists() for name in entries)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped"])
def test_a_damaged_entry_is_compiled_again_with_a_warning(first_cache, damage):
    tmp_path = first_cache
    directory = tmp_path / xla_cache.versioned_name()
    for name in _entries(tmp_path):
        path = directory / name
        data = path.read_bytes()
        if damage == "garbage":
            path.write_bytes(b"not an executable\n")
        elif damage == "truncated":
            path.write_bytes(data[: len(data) // 3])
        else:  # one bit, deep inside the executable: only the checksum sees it
            middle = len(data) // 2
            path.write_bytes(data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1 :])
    result, stderr = _finish(_start(tmp_path))
    np.testing.assert_allclose(result, _expected(), rtol=1e-5)
    assert "it is removed, and its program compiled again" in stderr
    assert xla_cache.remove_damaged_entries(str(directory)) == []


@pytest.mark.slow
def test_a_copied_cache_keeps_its_checksums_and_a_flipped_bit_in_the_copy_is_found(first_cache):
    """A copy (a backup restored, `cp -r`) gives every file a new inode: its entries still
    match their checksums, and one bit flipped in the copy is found."""
    directory = first_cache / xla_cache.versioned_name()
    copy = first_cache / "copy"
    shutil.copytree(directory, copy)
    assert xla_cache.remove_damaged_entries(str(copy)) == []
    entries = _entries(first_cache)
    for name in entries:
        data = (copy / name).read_bytes()
        middle = len(data) // 2
        flipped = data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1 :]
        (copy / name).write_bytes(flipped)
    assert xla_cache.remove_damaged_entries(str(copy)) == [str(copy / n) for n in entries]


@pytest.mark.slow
def test_an_entry_renamed_over_a_checksummed_one_gets_its_own_checksum(first_cache):
    """Two processes writing one entry: the second renames its whole entry (other bytes,
    a new inode) over the first one's, already checksummed; the second's exit records it."""
    directory = first_cache / xla_cache.versioned_name()
    for name in _entries(first_cache):
        data = (directory / name).read_bytes()
        other = directory / ".tmp-other"
        other.write_bytes(data + b"\x78\x01")  # still whole: one more (unknown) field
        os.replace(other, directory / name)
    xla_cache.record_checksums(str(directory))
    assert xla_cache.remove_damaged_entries(str(directory)) == []


@pytest.mark.slow
def test_processes_writing_the_same_entry_at_once_leave_a_valid_cache(tmp_path):
    processes = [_start(tmp_path) for _ in range(2)]
    results = [_finish(p)[0] for p in processes]
    for result in results:
        np.testing.assert_allclose(result, _expected(), rtol=1e-5)
    directory = tmp_path / xla_cache.versioned_name()
    assert xla_cache.remove_damaged_entries(str(directory)) == []
    assert [n for n in os.listdir(directory) if n.startswith(".tmp")] == []
    third, stderr = _finish(_start(tmp_path))
    np.testing.assert_allclose(third, _expected(), rtol=1e-5)
    assert "compiled again" not in stderr


@pytest.mark.slow
def test_the_key_covers_the_program_and_the_versions(first_cache):
    tmp_path = first_cache
    first_entries = _entries(tmp_path)
    # Another program (one op differs) is not given the first one's executable.
    other, _ = _finish(_start(tmp_path, PROGRAM.replace("tf.tanh", "tf.sigmoid")))
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10.0
    np.testing.assert_allclose(other, (1 / (1 + np.exp(-(x @ x.T)))).sum(axis=1), rtol=1e-5)
    assert set(first_entries) < set(_entries(tmp_path))
    # Entries live under the versions of TensorFlow and openipu that wrote them.
    assert os.listdir(tmp_path) == [xla_cache.versioned_name()]
    assert f"tf{tf.__version__}" in xla_cache.versioned_name()
    assert "openipu" in xla_cache.versioned_name()


def test_without_the_flag_there_is_no_cache(monkeypatch):
    monkeypatch.delenv("TF_POPLAR_FLAGS", raising=False)
    assert xla_cache.configure() is None


def test_a_cache_path_set_after_the_import_is_reported(ipu_system, monkeypatch, tmp_path, caplog):
    # TensorFlow reads its XLA cache flag when its runtime starts (the IPU module's import).
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--executable_cache_path={tmp_path}")
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    with caplog.at_level("WARNING", logger="openipu._src.system.xla_cache"):
        config.configure_ipu_system()
    assert f"--executable_cache_path={tmp_path} was set after" in caplog.text
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_a_changed_ipu_option_makes_a_new_entry_and_the_same_one_hits(tmp_path):
    # The original's key covers the compile options; here the options that change what a
    # program computes change its HLO (nanoo: half overflows saturate, or make NaNs).
    changed = PROGRAM.replace(
        "config.auto_select_ipus = 1",
        "config.auto_select_ipus = 1\nconfig.floating_point_behaviour.nanoo = True",
    )
    _finish(_start(tmp_path, changed))
    entries = _entries(tmp_path)
    directory = tmp_path / xla_cache.versioned_name()
    mtimes = {name: os.path.getmtime(directory / name) for name in entries}
    result, _ = _finish(_start(tmp_path))
    np.testing.assert_allclose(result, _expected(), rtol=1e-5)
    both = _entries(tmp_path)
    assert len(both) > len(entries)  # a second entry, not a stale hit
    again, _ = _finish(_start(tmp_path, changed))
    np.testing.assert_allclose(again, _expected(), rtol=1e-5)
    assert _entries(tmp_path) == both  # the same program and options: a hit
    assert {name: os.path.getmtime(directory / name) for name in entries} == mtimes
