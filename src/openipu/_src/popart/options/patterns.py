"""`popart.Patterns`: which of PopART's graph-rewriting patterns a session applies.

The patterns rewrite PopART's IR for the Poplar backend; the emulation lowers ONNX to
TensorFlow directly, so they change no numbers. They are kept as a registry of the
original's pattern names so that programs naming them are validated: an unknown name is an
error, and a session refuses to run with a mandatory pattern disabled unless runtime asserts
are turned off (`Patterns(PatternsLevel.NoPatterns).enableRuntimeAsserts(False)`).
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass
from typing import Any

from openipu._src.popart.errors import OptionTypeError, popart_exception
from openipu._src.popart.options.typed_fields import check_bool
from openipu._src.popart.pybind_arguments import STR, Arg, EnumOf, ListOf, Signature, bind


class PatternsLevel(enum.IntEnum):
    NoPatterns = 0
    Minimal = 1
    Default = 2
    All = 3


@dataclass(frozen=True)
class _PatternInfo:
    enabled_by_default: bool
    mandatory: bool  # the backend has no lowering for what the pattern removes


def _patterns(mandatory: str, default: str, optional: str) -> dict[str, _PatternInfo]:
    table = {name: _PatternInfo(True, True) for name in mandatory.split()}
    table.update({name: _PatternInfo(True, False) for name in default.split()})
    table.update({name: _PatternInfo(False, False) for name in optional.split()})
    return table


# The original's pattern registry: every `PatternCreator` of willow/src/patterns/*.cpp with
# its (enabled, mandatory) flags, plus InPlace and UpdateInplacePrioritiesForIpu, which
# `Patterns` handles by name (willow/src/patterns/patterns.cpp). Any other name is unknown.
PATTERNS: dict[str, _PatternInfo] = _patterns(
    mandatory="""
        AbsGradOp AllReduceToIdentity Atan2Arg0GradOp Atan2Arg1GradOp ConvDataGrad
        ConvFlipWeightsGradOp ConvTranspose CosGradOp CoshOp DivArg0GradOp DivArg1GradOp
        ExpGradOp Expm1GradOp FmodArg0GradOp Log1pGradOp LogGradOp LoopScanOut
        MatMulLhsGradOp MatMulOp MatMulRhsGradOp MulArgGradOp PowArg0GradOp PowArg1GradOp
        RandomNormalLikeOpPattern RandomUniformLikeOpPattern ReciprocalGradOp ScanToLoop
        SinGradOp SqrtGradOp SubtractArg1GradOp ZerosLikeOpPattern
    """,
    default="""
        ConvFlipWeightsDoubleFlip DecomposeBinaryConstScalar ExpandCast InitAccumulate
        LambSerialisedWeight NegativeOneScale NlllWithSoftmaxGradDirect OpToIdentity
        PackedDataBlock PadSum PostNRepl PreUniRepl RemoveUnnecessaryLossGradCast
        SoftmaxGradDirect SplitGradOpToConcat SplitOp SumToAdd
        TransposeToIdentityOrReshapePattern UpsampleToResize InPlace
        UpdateInplacePrioritiesForIpu
    """,
    optional="""
        LSTMOp Slice2SliceSubsample SplitGather TiedGather TiedGatherAccumulate
    """,
)

# The original exposes a few patterns as boolean properties of Patterns (property name ->
# pattern name; python/popart/popart_core/popart.cpp spells two of them differently).
_PROPERTY_PATTERNS = {
    "PreUniRepl": "PreUniRepl",
    "PostNRepl": "PostNRepl",
    "SoftMaxGradDirect": "SoftmaxGradDirect",
    "NlllWithSoftMaxGradDirect": "NlllWithSoftmaxGradDirect",
    "OpToIdentity": "OpToIdentity",
    "SubtractArg1GradOp": "SubtractArg1GradOp",
    "MulArgGradOp": "MulArgGradOp",
    "MatMulOp": "MatMulOp",
    "MatMulLhsGradOp": "MatMulLhsGradOp",
    "MatMulRhsGradOp": "MatMulRhsGradOp",
    "InPlace": "InPlace",
}


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise OptionTypeError(f"A pattern name must be a str, got {name!r} ({type(name).__name__})")
    if name not in PATTERNS:
        close = difflib.get_close_matches(name, PATTERNS, n=1)
        hint = f", did you mean {close[0]}?" if close else ""
        raise popart_exception(f"Unknown pattern {name}{hint}")
    return name


def _enabled_at(level: PatternsLevel) -> set[str]:
    if level is PatternsLevel.NoPatterns:
        return set()
    if level is PatternsLevel.Minimal:
        return {name for name, info in PATTERNS.items() if info.mandatory}
    if level is PatternsLevel.Default:
        return {name for name, info in PATTERNS.items() if info.enabled_by_default}
    return set(PATTERNS)


# The constructors popart.cpp binds; another type is pybind11's TypeError.
_SIGNATURES = (
    Signature(),
    Signature((Arg("level", EnumOf(PatternsLevel, "popart_core.PatternsLevel")),)),
    Signature((Arg("patterns", ListOf(STR)),)),
)


class Patterns:
    """`Patterns()` (Default level), `Patterns(PatternsLevel)` or `Patterns([names])`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _, values = bind(
            "__init__", _SIGNATURES, args, kwargs, owner="popart_core.Patterns", constructor=True
        )
        self._runtime_asserts = True
        if "patterns" in values:
            self._enabled = {_check_name(name) for name in values["patterns"]}
        else:
            self._enabled = _enabled_at(values.get("level", PatternsLevel.Default))

    def enablePattern(self, name: str, enable: bool) -> Patterns:  # noqa: N802 - the original's
        _check_name(name)
        if check_bool(enable, f"enablePattern({name!r}, enable): enable"):
            self._enabled.add(name)
            return self
        info = PATTERNS.get(name)
        if info is not None and info.mandatory:
            # willow/src/patterns/patterns.cpp, Patterns::enablePattern (the properties such
            # as MatMulLhsGradOp go through it too); a Patterns made from a list of names
            # may still leave them out, which sessions refuse while runtime asserts are on.
            raise popart_exception(f"Pattern '{name}' is mandatory and cannot be disabled")
        self._enabled.discard(name)
        return self

    def isPatternEnabled(self, name: str) -> bool:  # noqa: N802
        return _check_name(name) in self._enabled

    def enableRuntimeAsserts(self, enable: bool) -> Patterns:  # noqa: N802
        self._runtime_asserts = check_bool(enable, "Patterns.enableRuntimeAsserts(enable)")
        return self

    @property
    def runtimeAssertsOn(self) -> bool:  # noqa: N802
        return self._runtime_asserts

    def enabledPatterns(self) -> list[str]:  # noqa: N802 - an openipu addition, for reports
        return sorted(self._enabled)

    def ensureMandatoryPatternsEnabled(self) -> None:  # noqa: N802
        """What a session checks: mandatory patterns on, unless runtime asserts are off."""
        if not self._runtime_asserts:
            return
        missing = sorted(
            name for name, info in PATTERNS.items() if info.mandatory and name not in self._enabled
        )
        if missing:
            # The original's words for the first (patterns.cpp,
            # ensureAllMandatoryPreAliasPatternsAreEnabled), then every one missing.
            raise popart_exception(
                f"Pattern '{missing[0]}' must be enabled (mandatory patterns disabled: "
                f"{missing}). Enable them, or turn the check off with "
                "Patterns.enableRuntimeAsserts(False) if you know what you are doing"
            )

    def __repr__(self) -> str:
        return f"Patterns({self.enabledPatterns()})"


def _pattern_property(name: str) -> property:
    def get(self: Patterns) -> bool:
        return self.isPatternEnabled(name)

    def set_(self: Patterns, enable: bool) -> None:
        self.enablePattern(name, enable)

    return property(get, set_, doc=f"Whether the {name} pattern is enabled.")


for _property, _name in _PROPERTY_PATTERNS.items():
    setattr(Patterns, _property, _pattern_property(_name))
del _property, _name
