"""PopART's reserved tensor-name prefixes (`popart.reservedGradientPrefix()` and friends).

User code builds tensor ids with them, e.g. anchoring `reservedGradientPrefix() + "w"` to
fetch the gradient of weight `w` from a training session.
"""

from __future__ import annotations


def _prefix_function(name: str, prefix: str):
    def function() -> str:
        return prefix

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"The prefix {prefix!r} of PopART's reserved tensor names."
    return function


reservedGradientPrefix = _prefix_function("reservedGradientPrefix", "Gradient___")
reservedUpdatedVarPrefix = _prefix_function("reservedUpdatedVarPrefix", "UpdatedVar___")
reservedAccumPrefix = _prefix_function("reservedAccumPrefix", "Accum___")
reservedAcclPrefix = _prefix_function("reservedAcclPrefix", "Accl___")
reservedAccl1Prefix = _prefix_function("reservedAccl1Prefix", "Accl1___")
reservedAccl2Prefix = _prefix_function("reservedAccl2Prefix", "Accl2___")
reservedAccl3Prefix = _prefix_function("reservedAccl3Prefix", "Accl3___")
reservedStepPrefix = _prefix_function("reservedStepPrefix", "Step___")
reservedStashedPrefix = _prefix_function("reservedStashedPrefix", "Stashed___")
reservedRestoredPrefix = _prefix_function("reservedRestoredPrefix", "Restored___")
reservedLossScalingPrefix = _prefix_function("reservedLossScalingPrefix", "lossScaling_")
reservedRandomSeedPrefix = _prefix_function("reservedRandomSeedPrefix", "randomSeed___")
reservedRemoteArgPrefix = _prefix_function("reservedRemoteArgPrefix", "RemoteArg___")
reservedInitPrefix = _prefix_function("reservedInitPrefix", "Init___")
reservedConcatInitPrefix = _prefix_function("reservedConcatInitPrefix", "ConcatInit___")
reservedCounterPrefix = _prefix_function("reservedCounterPrefix", "Counter___")
reservedSeedModifierPrefix = _prefix_function("reservedSeedModifierPrefix", "SeedModifier___")
reservedLoopIteratorPrefix = _prefix_function("reservedLoopIteratorPrefix", "LoopIterator___")
reservedLoopCondPrefix = _prefix_function("reservedLoopCondPrefix", "LoopCond___")


_ALL = (
    reservedGradientPrefix,
    reservedUpdatedVarPrefix,
    reservedAccumPrefix,
    reservedAcclPrefix,
    reservedAccl1Prefix,
    reservedAccl2Prefix,
    reservedAccl3Prefix,
    reservedStepPrefix,
    reservedStashedPrefix,
    reservedRestoredPrefix,
    reservedLossScalingPrefix,
    reservedRandomSeedPrefix,
    reservedRemoteArgPrefix,
    reservedInitPrefix,
    reservedConcatInitPrefix,
    reservedCounterPrefix,
    reservedSeedModifierPrefix,
    reservedLoopIteratorPrefix,
    reservedLoopCondPrefix,
)


def reservedPrefixes() -> list[str]:  # noqa: N802 - the original's name
    """Every reserved prefix."""
    return [prefix() for prefix in _ALL]


def is_reserved(tensor_id: str) -> bool:
    return any(tensor_id.startswith(prefix()) for prefix in _ALL)
