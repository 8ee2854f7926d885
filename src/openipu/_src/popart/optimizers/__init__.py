"""PopART's optimizers: SGD (and ConstSGD), Adam and Adaptive, one family per module."""

from openipu._src.popart.optimizers.adam import Adam
from openipu._src.popart.optimizers.adaptive import Adaptive
from openipu._src.popart.optimizers.clip_norm import ClipNormSettings
from openipu._src.popart.optimizers.enums import (
    AdamMode,
    AdaptiveMode,
    SGDAccumulatorAndMomentum,
    WeightDecayMode,
)
from openipu._src.popart.optimizers.optimizer import Optimizer
from openipu._src.popart.optimizers.sgd import SGD, ConstSGD
from openipu._src.popart.optimizers.values import OptimizerValue, OptimizerValueMap

__all__ = [
    "SGD",
    "Adam",
    "AdamMode",
    "Adaptive",
    "AdaptiveMode",
    "ClipNormSettings",
    "ConstSGD",
    "Optimizer",
    "OptimizerValue",
    "OptimizerValueMap",
    "SGDAccumulatorAndMomentum",
    "WeightDecayMode",
]
