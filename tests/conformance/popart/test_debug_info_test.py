"""graphcore/popart tests/integration/debug_info_test.py: debug infos made for a layer, one
passed down to a callee through a named DebugContext, are written by
initializePoplarDebugInfo (json) with their names, parent, layer, values and the Python
location (file, function, line) that made each context (Cpu)."""

import inspect
import json

import pytest

import popart


def bar(arg, debugContext):
    di = popart.DebugInfo(debugContext, "unit_test")
    di.setValue("arg", str(arg))


def foo(arg, debugContext):
    di = popart.DebugInfo(debugContext, "unit_test")
    di.setValue("arg", str(arg))
    bar(123, debugContext=popart.DebugContext(di, "bar"))
    return inspect.currentframe().f_lineno - 1  # the line that made bar's context


@pytest.mark.follows("test_basic")
def test_basic(tmpdir):
    filename = str(tmpdir) + "/debug.json"
    popart.initializePoplarDebugInfo(filename, "json")
    foo_line = inspect.currentframe().f_lineno + 1
    bar_line = foo(42, popart.DebugContext())
    popart.closePoplarDebugInfo()

    with open(filename, encoding="utf-8") as json_file:
        data = json.load(json_file)
    assert len(data["contexts"]) == 2
    bar_context, foo_context = data["contexts"]  # written out backwards
    strings = data["stringTable"]
    assert strings[int(foo_context["name"])] == ""
    assert strings[int(bar_context["name"])] == "bar"
    assert bar_context["parentId"] == 1
    assert bar_context["layer"] == foo_context["layer"] == "unit_test"
    assert bar_context["arg"] == "123"
    assert foo_context["arg"] == "42"
    bar_location = bar_context["location"]
    foo_location = foo_context["location"]
    assert strings[int(foo_location["fileName"])].endswith("test_debug_info_test.py")
    assert strings[int(bar_location["fileName"])].endswith("test_debug_info_test.py")
    assert strings[int(foo_location["functionName"])] == "test_basic"
    assert strings[int(bar_location["functionName"])] == "foo"
    assert foo_location["lineNumber"] == foo_line
    assert bar_location["lineNumber"] == bar_line
