"""The optimizer tensors of PopART's SGD0 weight update (SGD without velocity), which a
training session of the original has and can anchor: `scaledLearningRate0___default___<TYPE>`
(or `...___specific___<weight>`) = lr * (1 - dampening) / (lossScaling * af * rf), and
`weightDecayScaleFactor0___default___<TYPE>` (or specific) = 1 - lr * (1 - dampening) * wd,
where af and rf are the accumulation and replication factors when the reduction is a Mean
over them taken after the sum (Post), else 1 (willow/include/popart/compoundscalarhelper.hpp).

A default tensor serves the weights of one type that have no specific values. Like the
original, a tensor exists only when one of its values is non-const (const ones are compiled
into the update). openipu applies the values in its update directly; these tensors give the
values the original's would hold, for anchors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tensorflow as tf

from openipu._src.popart import reserved_names
from openipu._src.popart.optimizers.optimizer import Value
from openipu._src.popart.optimizers.sgd import SGD

_SCALED_LEARNING_RATE = "scaledLearningRate0"
_WEIGHT_DECAY_SCALE_FACTOR = "weightDecayScaleFactor0"


@dataclass(frozen=True)
class Sgd0Tensor:
    tensor_id: str
    kind: str  # _SCALED_LEARNING_RATE or _WEIGHT_DECAY_SCALE_FACTOR
    weight_id: str  # a weight whose values it holds
    dtype: tf.DType
    factor: float  # af * rf (or 1)

    def value(self, read: Callable[[str, str], Value], loss_scaling: Value) -> tf.Tensor:
        """Inside a step: its value from the session's current optimizer values."""
        lr = tf.cast(read("learningRate", self.weight_id), tf.float32)
        dampening = tf.cast(read("dampening", self.weight_id), tf.float32)
        if self.kind == _SCALED_LEARNING_RATE:
            scaling = tf.cast(loss_scaling, tf.float32) * self.factor
            result = lr * (1.0 - dampening) / scaling
        else:
            decay = tf.cast(read("weightDecay", self.weight_id), tf.float32)
            result = 1.0 - lr * (1.0 - dampening) * decay
        return tf.cast(result, self.dtype)


def _prefix(name: str) -> str:
    # These reserved-name functions are made at import (reserved_names.py), unseen by mypy.
    return str(getattr(reserved_names, name)())


def _prefixes() -> list[tuple[str, str, bool]]:
    """(prefix, kind, default?) of the four tensor name prefixes."""
    return [
        (_prefix("reservedDefaultScaledLearningRate0Prefix"), _SCALED_LEARNING_RATE, True),
        (_prefix("reservedSpecificScaledLearningRate0Prefix"), _SCALED_LEARNING_RATE, False),
        (
            _prefix("reservedDefaultWeightDecayScaleFactor0Prefix"),
            _WEIGHT_DECAY_SCALE_FACTOR,
            True,
        ),
        (
            _prefix("reservedSpecificWeightDecayScaleFactor0Prefix"),
            _WEIGHT_DECAY_SCALE_FACTOR,
            False,
        ),
    ]


def resolve(
    tensor_id: str,
    optimizer: object,
    weight_types: dict[str, tuple[tf.DType, str]],
    accumulating: bool,
    factor: float,
) -> Sgd0Tensor | None:
    """The SGD0 tensor `tensor_id` names in this session, or None if it has none of that
    name. `weight_types`: trained weight -> (its type, its PopART type name)."""
    if not isinstance(optimizer, SGD):
        return None
    for prefix, kind, default in _prefixes():
        if not tensor_id.startswith(prefix):
            continue
        suffix = tensor_id[len(prefix) :]
        specific = set(optimizer.specific_weight_ids())
        if default:
            users = [w for w, (_, name) in weight_types.items() if name == suffix]
            users = [w for w in users if w not in specific]
        else:
            users = [suffix] if suffix in weight_types and suffix in specific else []
        users = [w for w in users if not optimizer.keeps_velocity(w, accumulating)]
        if not users:
            return None
        weight = users[0]
        keys = ["learningRate", "dampening"]
        keys += ["weightDecay"] if kind == _WEIGHT_DECAY_SCALE_FACTOR else []
        const = all(optimizer.value(key, weight).isConst() for key in keys)
        if kind == _SCALED_LEARNING_RATE:
            const = const and optimizer.loss_scaling.isConst()
        if const:
            return None
        return Sgd0Tensor(tensor_id, kind, weight, weight_types[weight][0], factor)
    return None
