"""The optimizers' enums, numbered like the original's."""

from __future__ import annotations

import enum


class WeightDecayMode(enum.IntEnum):
    """Decay: decoupled weight decay (AdamW). L2Regularization: wd * w added to the gradient."""

    Decay = 0
    L2Regularization = 1


class AdamMode(enum.IntEnum):
    Adam = 0
    AdamNoBias = 1
    AdaMax = 2
    Lamb = 3
    LambNoBias = 4


class AdaptiveMode(enum.IntEnum):
    AdaGrad = 0
    RMSProp = 1
    CenteredRMSProp = 2
    AdaDelta = 3


class SGDAccumulatorAndMomentum(enum.IntEnum):
    """Combined: one tensor is the gradient accumulator and the velocity. Separate: two."""

    Combined = 0
    Separate = 1
