"""Tensors a training session has that the model does not: gradients, updated weights,
optimizer state, accumulators and the loss scaling, named with PopART's reserved prefixes
(`popart.reservedGradientPrefix() + "w"` is the gradient of `w`, and so on).

| anchor id              | value (per micro-batch and replica)                               |
|------------------------|-------------------------------------------------------------------|
| Gradient___<t>         | d(loss * loss scaling)/dt of this micro-batch, before accumulation |
|                        | and before the replicas' all-reduce (any tensor the loss depends on)|
| UpdatedVar___<w>       | weight w after the step                                           |
| Accl___<w>, Accl1___,  | w's optimizer state after the step (which exist depends on the    |
| Accl2___, Accl3___,    | optimizer: see `optimizers/`)                                     |
| Step___<w>             |                                                                   |
| Accum___<w>            | w's gradient accumulator after the step (gradient accumulation)   |
| lossScaling_<TYPE>     | the optimizer's loss scaling (TYPE: the loss's type, e.g. FLOAT)   |
| finalLossScale         | with automatic loss scaling: the loss scaling the step applied    |
| lossScaleUpdateFactor  | with automatic loss scaling: its factor after the step             |
| Accum___autoLossScale- | with it and gradient accumulation: its [lower, upper] histogram    |
| Stats                  | counts of the group's micro-batches so far                         |
| Restored___<t>         | pipelined training: activation t as the backward pass restores it  |
|                        | from its stash (the same values as t's)                           |

"After the step" includes the weight update without gradient accumulation. With it, the
update runs once a group's last micro-batch is done, so it shows from the next micro-batch
on (and in weightsToHost); the accumulator then holds the group's full sum at its last
micro-batch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from openipu._src.popart import reserved_names
from openipu._src.popart.session.loss_scaling import (
    FINAL_LOSS_SCALE_ID,
    STATISTICS_ID,
    UPDATE_FACTOR_ID,
)


class ReservedKind(enum.Enum):
    GRADIENT = "gradient"
    UPDATED_WEIGHT = "updated weight"
    STATE = "optimizer state"
    ACCUMULATOR = "gradient accumulator"
    LOSS_SCALING = "loss scaling"
    FINAL_LOSS_SCALE = "final loss scale"
    LOSS_SCALE_UPDATE_FACTOR = "loss scale update factor"
    LOSS_SCALE_STATISTICS = "loss scale statistics"
    RESTORED = "restored activation"


@dataclass(frozen=True)
class ReservedTensor:
    tensor_id: str
    kind: ReservedKind
    base: str  # the tensor it belongs to (a weight, or for gradients any tensor); "" for ls

    @property
    def variable_id(self) -> str:
        """The device variable holding it (for updated weights, state and accumulators)."""
        return self.base if self.kind is ReservedKind.UPDATED_WEIGHT else self.tensor_id


def state_prefixes() -> tuple[str, ...]:
    """The prefixes of optimizer-state tensors (willow/src/tensornames.cpp)."""
    return (
        reserved_names.reservedAcclPrefix(),
        reserved_names.reservedAccl1Prefix(),
        reserved_names.reservedAccl2Prefix(),
        reserved_names.reservedAccl3Prefix(),
        reserved_names.reservedStepPrefix(),
    )


def parse(
    tensor_id: str, automatic_loss_scaling: bool = False, accumulating: bool = False
) -> ReservedTensor | None:
    """What a reserved tensor id names, or None for an id without a training prefix (the
    tensors automatic loss scaling adds exist only with it)."""
    if automatic_loss_scaling:
        automatic = {
            FINAL_LOSS_SCALE_ID: ReservedKind.FINAL_LOSS_SCALE,
            UPDATE_FACTOR_ID: ReservedKind.LOSS_SCALE_UPDATE_FACTOR,
        }
        if accumulating:
            automatic[STATISTICS_ID] = ReservedKind.LOSS_SCALE_STATISTICS
        if tensor_id in automatic:
            return ReservedTensor(tensor_id, automatic[tensor_id], "")
    kinds = [
        (reserved_names.reservedGradientPrefix(), ReservedKind.GRADIENT),
        (reserved_names.reservedUpdatedVarPrefix(), ReservedKind.UPDATED_WEIGHT),
        (reserved_names.reservedAccumPrefix(), ReservedKind.ACCUMULATOR),
        (reserved_names.reservedRestoredPrefix(), ReservedKind.RESTORED),
        *((prefix, ReservedKind.STATE) for prefix in state_prefixes()),
    ]
    for prefix, kind in kinds:
        if tensor_id.startswith(prefix) and len(tensor_id) > len(prefix):
            return ReservedTensor(tensor_id, kind, tensor_id[len(prefix) :])
    if tensor_id.startswith(reserved_names.reservedLossScalingPrefix()):
        return ReservedTensor(tensor_id, ReservedKind.LOSS_SCALING, "")
    return None


def loss_scaling_id(loss_type_name: str) -> str:
    """`lossScaling_FLOAT`, `lossScaling_FLOAT16`: the loss scaling tensor's id."""
    prefix: str = reserved_names.reservedLossScalingPrefix()
    return prefix + loss_type_name
