"""`GradientAccumulationReductionMethod`: how micro-batch gradients are combined."""

from __future__ import annotations

import enum


class GradientAccumulationReductionMethod(enum.Enum):
    """How the gradients of N micro-batches are combined before the weight update.

    SUM adds them; MEAN adds each divided by N; RUNNING_MEAN keeps a running
    mean, acc_{n+1} = acc_n * n / (n + 1) + g_n / (n + 1) (n counts from 0),
    which ends at the mean by a different rounding path.
    """

    SUM = 0
    MEAN = 1
    RUNNING_MEAN = 2

    @classmethod
    def parse(
        cls, value, parameter: str = "reduction_method"
    ) -> GradientAccumulationReductionMethod:
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        raise ValueError(
            f"{parameter} must be one of 'sum', 'mean', 'running_mean' "
            f"(or a GradientAccumulationReductionMethod), got {value!r}"
        )
