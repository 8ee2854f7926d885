"""Patterns, popart.getLogger, the reserved tensor-name prefixes and the public modules."""

from __future__ import annotations

import importlib
import logging
import pathlib

import pytest

import popart


def test_pattern_levels():
    assert popart.Patterns().isPatternEnabled("InPlace")  # Default level
    none = popart.Patterns(popart.PatternsLevel.NoPatterns)
    assert not none.isPatternEnabled("InPlace") and not none.isPatternEnabled("MatMulOp")
    minimal = popart.Patterns(popart.PatternsLevel.Minimal)
    assert minimal.isPatternEnabled("MatMulOp") and not minimal.isPatternEnabled("InPlace")
    every = popart.Patterns(popart.PatternsLevel.All)
    assert every.isPatternEnabled("TiedGather")
    assert not popart.Patterns().isPatternEnabled(
        "TiedGather"
    )  # off by default (tiedgatherpattern.cpp)


def test_named_patterns_and_properties():
    patterns = popart.Patterns(["PreUniRepl", "InPlace"])
    assert patterns.PreUniRepl and patterns.InPlace and not patterns.MatMulOp
    assert patterns.enablePattern("MatMulOp", True) is patterns
    assert patterns.MatMulOp
    patterns.InPlace = False
    assert not patterns.isPatternEnabled("InPlace")


def test_unknown_patterns_suggest_a_name():
    with pytest.raises(
        popart.popart_exception, match="Unknown pattern Inplace, did you mean InPlace"
    ):
        popart.Patterns(["Inplace"])
    with pytest.raises(popart.popart_exception, match="Unknown pattern Nothing"):
        popart.Patterns().isPatternEnabled("Nothing")
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        popart.Patterns("Default")
    with pytest.raises(TypeError, match="enable must be bool"):
        popart.Patterns().enablePattern("InPlace", "yes")
    # pybind11 converts a number to the bool parameter, as the original's binding does.
    assert not popart.Patterns().enablePattern("InPlace", 0).isPatternEnabled("InPlace")


def test_mandatory_patterns_check_follows_runtime_asserts():
    # A list of names may leave the mandatory patterns out (patterns.cpp's constructor) ...
    patterns = popart.Patterns(["PreUniRepl"])
    with pytest.raises(popart.popart_exception, match="must be enabled"):
        patterns.ensureMandatoryPatternsEnabled()
    patterns.enableRuntimeAsserts(False).ensureMandatoryPatternsEnabled()
    # ... but disabling one is refused, by name or by property (Patterns::enablePattern).
    with pytest.raises(popart.popart_exception, match="'MatMulOp' is mandatory and cannot be"):
        popart.Patterns().enablePattern("MatMulOp", False)
    with pytest.raises(popart.popart_exception, match="'MatMulLhsGradOp' is mandatory"):
        popart.Patterns().MatMulLhsGradOp = False
    assert not popart.Patterns().enablePattern("PadSum", False).isPatternEnabled("PadSum")


def test_logger_levels():
    saved = {name: logging.getLogger(name).level for name in ("popart", "popart.session")}
    try:
        logger = popart.getLogger()
        logger.setLevel("DEBUG")
        assert logging.getLogger("popart").level == logging.DEBUG
        popart.getLogger("session").setLevel("off")
        assert logging.getLogger("popart.session").level > logging.CRITICAL
        # An unknown level is OFF, without an error (willow/src/logging.cpp).
        logger.setLevel("LOUD")
        assert logging.getLogger("popart").level > logging.CRITICAL
    finally:
        # Later tests of this process read the loggers' levels.
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def test_reserved_prefixes():
    assert popart.reservedGradientPrefix() == "Gradient___"
    assert popart.reservedUpdatedVarPrefix() == "UpdatedVar___"
    assert popart.reservedAccl1Prefix() == "Accl1___"
    assert popart.reservedStepPrefix() == "Step___"
    assert popart.reservedLossScalingPrefix() == "lossScaling_"
    assert popart.reservedRandomSeedPrefix() == "randomSeed___"
    assert "Gradient___" in popart.reservedPrefixes()


def test_exceptions():
    assert issubclass(popart.OutOfMemoryException, popart.popart_exception)
    assert issubclass(popart.popart_runtime_error, popart.popart_exception)
    assert issubclass(popart.popart_exception, RuntimeError)


def test_builder_and_tensorinfo_modules_import():
    builder = importlib.import_module("popart.builder")
    tensorinfo = importlib.import_module("popart.tensorinfo")
    assert builder.Builder is popart.Builder and builder is popart.builder
    assert tensorinfo.TensorInfo is popart.TensorInfo and tensorinfo is popart.tensorinfo


@pytest.mark.parametrize(
    "name",
    [
        "InferenceSession", "SessionOptions", "DataFlow", "AnchorReturnType", "AnchorReturnTypeId",
        "PyStepIO", "PyStepIOCallback", "PyWeightsIO", "InputShapeInfo", "DeviceManager",
        "DeviceInfo", "DeviceType", "DeviceConnectionType", "SyncPattern",
        "DeviceSelectionCriterion", "Patterns", "PatternsLevel", "SyntheticDataMode",
        "VirtualGraphMode", "RecomputationType", "MergeVarUpdateType", "TensorLocation",
        "TensorLocationSettings", "TensorStorage", "TileSet", "ExchangeStrategy", "InputSettings",
        "ReplicatedStreamMode", "CommGroup", "VariableSettings", "VariableRetrievalMode",
        "getLogger", "reservedGradientPrefix", "OutOfMemoryException",
    ],
)  # fmt: skip
def test_public_names(name):
    assert getattr(popart, name) is not None


def test_public_modules_only_reexport():
    root = pathlib.Path(popart.__file__).parent
    for path in root.glob("*.py"):
        for line in path.read_text().splitlines():
            assert not line.startswith(("def ", "class ")), f"{path.name} defines {line!r}"


def test_out_of_memory_exception():
    error = popart.OutOfMemoryException(popart.popart_exception("too big"), "report")
    assert str(error) == "too big" and error.getSummaryReport() == "report"
    assert error.getProfilePath() == ""
