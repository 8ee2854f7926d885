"""The SGD optimizer's streamed compound scalars, which a training session may anchor.

PopART's SGD without momentum (willow/src/sgd.cpp, an SGD0 update) streams two scalars per
weight type (`scaledLearningRate0___default___FLOAT`) or per weight with specific values
(`scaledLearningRate0___specific___<w>`), when they are not const
(willow/src/compoundscalarhelper.cpp):

    scaledLearningRate0     = lr * (1 - dampening) / (lossScaling * af * rf)
    weightDecayScaleFactor0 = 1 - lr * (1 - dampening) * weightDecay

where af is the accumulation factor and rf the replication factor when the reduction over
them is a Mean taken after the accumulation (`MeanReductionStrategy.Post`), else 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tensorflow as tf

from openipu._src.popart import reserved_names
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.optimizers.optimizer import Optimizer, Value
from openipu._src.popart.optimizers.sgd import SGD

SCALED_LEARNING_RATE = "scaledLearningRate0"
WEIGHT_DECAY_SCALE_FACTOR = "weightDecayScaleFactor0"
_NAMES = reserved_names.OPTIMIZER_PREFIXES
_PREFIXES = {
    _NAMES["reservedDefaultScaledLearningRate0Prefix"]: (SCALED_LEARNING_RATE, False),
    _NAMES["reservedSpecificScaledLearningRate0Prefix"]: (SCALED_LEARNING_RATE, True),
    _NAMES["reservedDefaultWeightDecayScaleFactor0Prefix"]: (WEIGHT_DECAY_SCALE_FACTOR, False),
    _NAMES["reservedSpecificWeightDecayScaleFactor0Prefix"]: (WEIGHT_DECAY_SCALE_FACTOR, True),
}
# The hyper-parameters each scalar is made of (it is streamed when one is not const).
_INGREDIENTS = {
    SCALED_LEARNING_RATE: ("learningRate", "dampening"),
    WEIGHT_DECAY_SCALE_FACTOR: ("learningRate", "dampening", "weightDecay"),
}


@dataclass(frozen=True)
class OptimizerTensor:
    tensor_id: str
    quantity: str  # SCALED_LEARNING_RATE or WEIGHT_DECAY_SCALE_FACTOR
    weight_id: str  # a weight whose values it holds


def is_optimizer_tensor(tensor_id: str) -> bool:
    return any(tensor_id.startswith(prefix) for prefix in _PREFIXES)


def resolve(
    tensor_id: str,
    optimizer: Optimizer,
    accumulating: bool,
    weight_types: dict[str, str],
) -> OptimizerTensor:
    """The scalar an anchor id names, checked against the session's SGD0 weights
    (`weight_types`: each trained weight's PopART type name, such as FLOAT)."""
    prefix = next(p for p in _PREFIXES if tensor_id.startswith(p))
    quantity, specific = _PREFIXES[prefix]
    rest = tensor_id[len(prefix) :]
    specific_ids = set(optimizer.specific_weight_ids())
    candidates = [
        weight
        for weight, type_name in weight_types.items()
        if isinstance(optimizer, SGD)
        and not optimizer.keeps_velocity(weight, accumulating)
        and (weight == rest if specific else type_name == rest and weight not in specific_ids)
        and (not specific or weight in specific_ids)
    ]
    streamed = [
        weight
        for weight in candidates
        if not all(optimizer.value(key, weight).isConst() for key in _INGREDIENTS[quantity])
        or (quantity == SCALED_LEARNING_RATE and not optimizer.loss_scaling.isConst())
    ]
    if not streamed:
        raise popart_exception(
            f"Anchor tensor `{tensor_id}' not in Ir Tensors. The optimizer streams it only "
            "for weights an SGD without momentum updates whose "
            f"{', '.join(_INGREDIENTS[quantity])} are not all const"
        )
    return OptimizerTensor(tensor_id, quantity, streamed[0])


def value(
    tensor: OptimizerTensor,
    read: Callable[[str, str], Value],
    loss_scaling: Value,
    divisor: float,
) -> tf.Tensor:
    """The scalar in a step (`read` gives the weight's hyper-parameters; `divisor` is af * rf
    of a post-mean reduction)."""
    lr = tf.cast(read("learningRate", tensor.weight_id), tf.float32)
    dampening = tf.cast(read("dampening", tensor.weight_id), tf.float32)
    if tensor.quantity == SCALED_LEARNING_RATE:
        return lr * (1 - dampening) / (tf.cast(loss_scaling, tf.float32) * divisor)
    decay = tf.cast(read("weightDecay", tensor.weight_id), tf.float32)
    return 1 - lr * (1 - dampening) * decay
