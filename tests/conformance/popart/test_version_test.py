"""graphcore/popart tests/integration/version_test.py: versionNumber is a 3-tuple matching
versionString; packageHash is a non-empty string (Cpu)."""

import pytest

import popart


@pytest.mark.follows("test_version_number")
def test_version_number():
    ver = popart.versionNumber()
    assert isinstance(ver, tuple) and len(ver) == 3
    ver_string = popart.versionString()
    assert isinstance(ver_string, str) and ver_string
    # The original reads its source tree's version.json; the string states the same numbers.
    assert ver_string.startswith(".".join(str(v) for v in ver))
    pkg_hash = popart.packageHash()
    assert isinstance(pkg_hash, str) and pkg_hash
