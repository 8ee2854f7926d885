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

    def accumulate(self, accumulator, gradient, count: int, index):
        """Adds micro-batch `index` (0-based) of `count` into `accumulator`; returns the update."""
        import tensorflow as tf

        gradient = tf.cast(tf.convert_to_tensor(gradient), accumulator.dtype)
        if self is GradientAccumulationReductionMethod.SUM:
            return accumulator.assign_add(gradient)
        if self is GradientAccumulationReductionMethod.MEAN:
            return accumulator.assign_add(gradient / count)
        n = tf.cast(index, accumulator.dtype)
        return accumulator.assign(accumulator * n / (n + 1) + gradient / (n + 1))
