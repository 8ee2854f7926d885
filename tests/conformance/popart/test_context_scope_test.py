"""graphcore/popart tests/integration/context_scope_test.py: the Builder's pipeline-stage,
virtual-graph and name scopes nest and report themselves (Cpu)."""

import pytest

import popart


def _check_nesting(builder, scope, has, get, message):
    assert has() is False
    with pytest.raises(popart.popart_exception) as e_info:
        get()
    assert message in e_info.value.args[0]
    for value in (0, 1, 0):
        with scope(value):
            assert has() is True
            assert get() == value
    with scope(0):
        with scope(1):
            assert has() is True and get() == 1
        assert has() is True and get() == 0


@pytest.mark.follows("test_get_pipeline_stage")
def test_get_pipeline_stage():
    b = popart.Builder()
    _check_nesting(
        b, b.pipelineStage, b.hasPipelineStage, b.getPipelineStage,
        "Pipeline stage not set in current scope",
    )  # fmt: skip


@pytest.mark.follows("test_get_virtual_graph")
def test_get_virtual_graph():
    b = popart.Builder()
    _check_nesting(
        b, b.virtualGraph, b.hasVirtualGraph, b.getVirtualGraph,
        "Virtual graph not set in current scope",
    )  # fmt: skip


@pytest.mark.follows("test_get_name_scope")
def test_get_name_scope():
    builder = popart.Builder()
    assert builder.getNameScope() == ""
    assert builder.getNameScope("foo") == "foo"
    with builder.nameScope("foo"):
        assert builder.getNameScope() == "foo/"
        assert builder.getNameScope("bar") == "foo/bar"
        with builder.nameScope("bar"):
            assert builder.getNameScope() == "foo/bar/"
