"""graphcore/popart tests/integration/loader_test.py: the module loads and has SGD (Cpu)."""

import pytest


@pytest.mark.follows("test_import")
def test_import():
    import popart

    assert "SGD" in dir(popart)
