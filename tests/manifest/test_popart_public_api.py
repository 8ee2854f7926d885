"""Every name of the PopART spec exists at its documented path: classes and functions of
`popart`, and the methods the spec documents on them (`popart.txt`, generated from the spec)."""

from __future__ import annotations

import importlib
import pathlib

import pytest

MANIFEST = pathlib.Path(__file__).with_name("popart.txt")


def _names() -> list[str]:
    lines = MANIFEST.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _module_and_attributes(full_name: str):
    parts = full_name.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            return importlib.import_module(".".join(parts[:split])), parts[split:]
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(full_name)


def _instance_of(cls):
    """An instance for classes whose methods are forwarded per instance (the Builder's core)."""
    import popart

    if cls is popart.Builder:
        return popart.Builder()
    return None


@pytest.mark.parametrize("full_name", _names())
def test_popart_public_name_resolves(full_name):
    obj, attributes = _module_and_attributes(full_name)
    for index, attribute in enumerate(attributes):
        if hasattr(obj, attribute):
            obj = getattr(obj, attribute)
            continue
        instance = _instance_of(obj) if index == len(attributes) - 1 else None
        assert instance is not None and hasattr(instance, attribute), f"{full_name} is missing"
        obj = getattr(instance, attribute)
    assert obj is not None


def test_manifest_has_the_spec_core_classes():
    names = set(_names())
    for expected in ("popart.Builder.addInputTensor", "popart.TrainingSession.run",
                     "popart.InferenceSession.weightsFromHost", "popart.writer.NetWriter"):  # fmt: skip
        assert expected in names
