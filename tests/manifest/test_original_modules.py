"""The original stack's public modules import at their paths (`original_modules.txt`), and the
names the original's packages re-export beyond the spec's chapters resolve."""

from __future__ import annotations

import importlib
import pathlib

import pytest
from test_public_api import _resolve

MANIFEST = pathlib.Path(__file__).with_name("original_modules.txt")


def _entries() -> list[tuple[str, str, str]]:
    entries = []
    for line in MANIFEST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            head, _, reason = line.partition("<-")
            status, module = head.split()
            entries.append((status, module, reason.strip()))
    return entries


def _params():
    for status, module, reason in _entries():
        marks = []
        if status == "pending":
            marks.append(pytest.mark.xfail(reason=reason, raises=ImportError, strict=True))
        yield pytest.param(module, id=module, marks=marks)


def test_statuses_are_known():
    assert {status for status, _, _ in _entries()} <= {"present", "pending"}


@pytest.mark.parametrize("module", _params())
def test_original_module_imports(module):
    importlib.import_module(module)


# Names the original's packages hold beyond the spec's chapters, at the paths programs use.
REEXPORTED_NAMES = {
    # tensorflow/python/ipu/utils.py re-exports the configuration API.
    "tensorflow.python.ipu.utils": {
        name: f"tensorflow.python.ipu.config.{name}"
        for name in (
            "IPUConfig",
            "SelectionOrder",
            "ExecutionProfileType",
            "DeviceConnectionType",
            "MergeRemoteBuffersBehaviour",
            "SchedulingAlgorithm",
            "get_ipu_config",
            "configure_ipu_system",
        )
    },
    # tensorflow/python/ipu/__init__.py: `functional_ops.outlined_function` at the top level.
    "tensorflow.python.ipu": {
        "outlined_function": "tensorflow.python.ipu.functional_ops.outlined_function",
        "f8_ops": "tensorflow.python.ipu.ops.f8_ops",
        "grad_util_ops": "tensorflow.python.ipu.ops.grad_util_ops",
    },
    "tensorflow.keras.ipu.extensions": {
        name: f"tensorflow.keras.ipu.{name}"
        for name in (
            "PipelineStage",
            "ModelLayerPipelineStageAssignment",
            "FunctionalLayerPipelineStageAssignment",
            "SequentialLayerPipelineStageAssignment",
            "NestedModelPipelineStageAssignment",
            "FunctionalNestedModelPipelineStageAssignment",
            "SequentialNestedModelPipelineStageAssignment",
            "ReplicatedMetricReductionMethod",
        )
    },
}


@pytest.mark.parametrize(
    "module, name, same_as",
    [(m, n, s) for m, names in REEXPORTED_NAMES.items() for n, s in names.items()],
)
def test_reexported_name_is_the_same_object(module, name, same_as):
    assert getattr(importlib.import_module(module), name) is _resolve(same_as)


# Names of the original's modules that are not there yet (their module is present).
PENDING_NAMES: list[tuple[str, str]] = []


@pytest.mark.parametrize("module, name", PENDING_NAMES)
@pytest.mark.xfail(reason="not implemented yet", raises=AttributeError, strict=True)
def test_pending_name(module, name):
    getattr(importlib.import_module(module), name)


def test_keras_marks_ipu_support():
    import tensorflow as tf

    assert tf.keras.ipu.__ipu__built__ == "1"
