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


# Prefixes of the optimizer's and the accumulators' tensors (willow/include/popart/
# tensornames.hpp), which the original's binding exposes too.
OPTIMIZER_PREFIXES = {
    "reservedAcclFinalOutPrefix": "AcclOutOfAcclUpdate___",
    "reservedAcclToReducePrefix": "AcclIntoReduce___",
    "reservedAcclToUpdatePrefix": "AcclIntoUpdate___",
    "reservedAdamUpdaterPrefix": "AdamUpdater___",
    "reservedAutomaticLossScalePrefix": "AutomaticLossScaleProxy___",
    "reservedDefaultAdamBeta1Prefix": "adamBeta1___default___",
    "reservedDefaultAdamBeta2Prefix": "adamBeta2___default___",
    "reservedDefaultAdamEpsPrefix": "adamEps___default___",
    "reservedDefaultDampeningScaleFactor1Prefix": "dampeningScaleFactor1___default___",
    "reservedDefaultLearningRatePrefix": "learningRate___default___",
    "reservedDefaultLossScalingPrefix": "lossScaling___default___",
    "reservedDefaultMaxWeightNormPrefix": "maxWeightNorm___default___",
    "reservedDefaultScaledLearningRate0Prefix": "scaledLearningRate0___default___",
    "reservedDefaultScaledLearningRate1Prefix": "scaledLearningRate1___default___",
    "reservedDefaultScaledMomentum1Prefix": "scaledMomentum1___default___",
    "reservedDefaultScaledWeightDecay1Prefix": "scaledWeightDecay1___default___",
    "reservedDefaultStepPrefix": "step___default___",
    "reservedDefaultWeightDecayPrefix": "weightDecay___default___",
    "reservedDefaultWeightDecayScaleFactor0Prefix": "weightDecayScaleFactor0___default___",
    "reservedFinalReducedGradPrefix": "FinalReducedGradient___",
    "reservedLambR1SqPrefix": "LambR1Sq___",
    "reservedLambR2SqPrefix": "LambR2Sq___",
    "reservedSpecificAdamBeta1Prefix": "adamBeta1___specific___",
    "reservedSpecificAdamBeta2Prefix": "adamBeta2___specific___",
    "reservedSpecificAdamEpsPrefix": "adamEps___specific___",
    "reservedSpecificDampeningScaleFactor1Prefix": "dampeningScaleFactor1___specific___",
    "reservedSpecificLearningRatePrefix": "learningRate___specific___",
    "reservedSpecificLossScalingPrefix": "lossScaling___specific___",
    "reservedSpecificMaxWeightNormPrefix": "maxWeightNorm___specific___",
    "reservedSpecificScaledLearningRate0Prefix": "scaledLearningRate0___specific___",
    "reservedSpecificScaledLearningRate1Prefix": "scaledLearningRate1___specific___",
    "reservedSpecificScaledMomentum1Prefix": "scaledMomentum1___specific___",
    "reservedSpecificScaledWeightDecay1Prefix": "scaledWeightDecay1___specific___",
    "reservedSpecificStepPrefix": "step___specific___",
    "reservedSpecificWeightDecayPrefix": "weightDecay___specific___",
    "reservedSpecificWeightDecayScaleFactor0Prefix": "weightDecayScaleFactor0___specific___",
}
globals().update(
    {name: _prefix_function(name, value) for name, value in OPTIMIZER_PREFIXES.items()}
)


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
