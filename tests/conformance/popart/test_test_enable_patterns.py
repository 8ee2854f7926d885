"""graphcore/popart tests/integration/pattern_tests/test_enable_patterns.py: patterns switch
on and off by name, InPlace also as an attribute (Cpu)."""

import pytest

import popart


@pytest.mark.follows("test_enable_pattern")
def test_enable_pattern():
    patterns = popart.Patterns()
    enabled = patterns.isPatternEnabled("PadSum")
    patterns.enablePattern("PadSum", not enabled)
    assert patterns.isPatternEnabled("PadSum") is not enabled


@pytest.mark.follows("test_enable_inplace")
def test_enable_inplace():
    patterns = popart.Patterns()
    patterns.enablePattern("InPlace", False)
    assert not patterns.InPlace
    patterns.enablePattern("InPlace", True)
    assert patterns.InPlace
