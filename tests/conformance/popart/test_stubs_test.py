"""graphcore/popart tests/integration/stubs_test.py: every AiOnnxOpsetN class popart
exports is in the return annotation of `Builder.__getattr__` (the generated stubs) (Cpu)."""

import re
from inspect import signature

import pytest

import popart


@pytest.mark.follows("test_all_opsets_in_builder___getattr___return_annotation")
def test_all_opsets_in_builder___getattr___return_annotation():
    pattern = re.compile("^AiOnnxOpset[0-9]+$")
    implemented = [getattr(popart, name) for name in dir(popart) if pattern.fullmatch(name)]
    assert len(implemented) == 6  # AiOnnxOpset6 to AiOnnxOpset11
    annotated = signature(popart.Builder.__getattr__).return_annotation.__args__
    for opset in implemented:
        assert opset in annotated, f"{opset} is not in Builder.__getattr__'s return annotation"
