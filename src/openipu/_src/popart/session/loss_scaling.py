"""Loss scaling of a training session: a const value, a non-const one (updateOptimizerFromHost
changes it), or automatic loss scaling (`SessionOptions.automaticLossScalingSettings`).

The backward pass starts from the loss gradient times the loss scaling, so every gradient is
scaled; the optimizers divide it out before they update their state (see `optimizers/`).

Automatic loss scaling follows the original's rule: after every `updatePeriod` weight updates,
the gradients it tracks are put in a two-bin histogram whose edge is `binEdgeLocation` times
the largest value of their type; if more than `thresholdUpperCountProportion` of their elements
fall in the upper bin (they are close to overflowing, or did), the loss scaling is halved,
otherwise doubled. It tracks float16 gradients only (float32 ones cannot overflow in
practice, so their histogram says nothing): the weight gradients of float16 weights, or, with
`GradientTensorTrackingMethod.GradientsOfUserSpecifiedTensors`, the gradients of the tensors
`toTrackTensors` names. The loss scaling stays within [1/65504, 65504] (float16's range),
or float32's range with `ensureFp32LossScaleTensor`. The original requires a non-const loss
scaling for it, and so does this.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from openipu._src.popart.errors import popart_exception
from openipu._src.popart.options.enums import GradientTensorTrackingMethod
from openipu._src.popart.options.settings import AutomaticLossScalingSettings

_FLOAT16_MAX = float(np.finfo(np.float16).max)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class AutomaticLossScaling:
    """The settings of automatic loss scaling and the gradients it tracks (by tensor id)."""

    tracked: tuple[str, ...]
    bin_edge_location: float
    threshold: float
    update_period: int
    largest: float

    @classmethod
    def plan(
        cls,
        settings: AutomaticLossScalingSettings,
        weight_types: dict[str, tf.DType],
        tensor_types: dict[str, tf.DType],
        fp32_loss_scale: bool,
    ) -> AutomaticLossScaling:
        """Which gradients to track; `tensor_types` has the types of `toTrackTensors`."""
        if not 0 < settings.binEdgeLocation < 1:
            raise popart_exception(
                "automaticLossScalingSettings.binEdgeLocation must be in (0, 1), got "
                f"{settings.binEdgeLocation}"
            )
        if not 0 <= settings.thresholdUpperCountProportion <= 1:
            raise popart_exception(
                "automaticLossScalingSettings.thresholdUpperCountProportion must be in [0, 1], "
                f"got {settings.thresholdUpperCountProportion}"
            )
        if settings.updatePeriod < 1:
            raise popart_exception(
                f"automaticLossScalingSettings.updatePeriod must be >= 1, got "
                f"{settings.updatePeriod}"
            )
        method = settings.gradientTensorTrackingMethod
        if method is GradientTensorTrackingMethod.GradientsOfUserSpecifiedTensors:
            names = list(settings.toTrackTensors or [])
            if not names:
                raise popart_exception(
                    "automaticLossScalingSettings.toTrackTensors is empty, but the tracking "
                    "method is GradientsOfUserSpecifiedTensors: name the tensors to track"
                )
            unknown = [name for name in names if name not in tensor_types]
            if unknown:
                raise popart_exception(
                    f"automaticLossScalingSettings.toTrackTensors names {unknown}, which are not "
                    "tensors of the model"
                )
            candidates = {name: tensor_types[name] for name in names}
        else:
            candidates = dict(weight_types)
        tracked = tuple(name for name, dtype in candidates.items() if dtype == tf.float16)
        if not tracked:
            raise popart_exception(
                "Automatic loss scaling tracks float16 gradients, but none of the tensors it "
                f"would track ({sorted(candidates)}) is float16: disable "
                "automaticLossScalingSettings, or train in float16"
            )
        return cls(
            tracked,
            settings.binEdgeLocation,
            settings.thresholdUpperCountProportion,
            settings.updatePeriod,
            _FLOAT32_MAX if fp32_loss_scale else _FLOAT16_MAX,
        )

    def upper_bin_proportion(self, gradients: list[tf.Tensor]) -> tf.Tensor:
        """The proportion of the tracked gradients' elements in the histogram's upper bin."""
        upper, total = [], 0
        for gradient in gradients:
            edge = self.bin_edge_location * float(gradient.dtype.max)
            magnitude = tf.abs(tf.cast(gradient, tf.float32))
            # An overflowed (inf or nan) element belongs to the upper bin.
            beyond = tf.logical_or(magnitude >= edge, tf.logical_not(tf.math.is_finite(magnitude)))
            upper.append(tf.reduce_sum(tf.cast(beyond, tf.float32)))
            total += gradient.shape.num_elements()
        return tf.add_n(upper) / total

    def next_loss_scaling(
        self, loss_scaling: tf.Tensor, proportion: tf.Tensor, updates: tf.Tensor
    ) -> tf.Tensor:
        """The loss scaling after weight update number `updates` (counted from 1)."""
        changed = tf.where(proportion > self.threshold, loss_scaling / 2, loss_scaling * 2)
        changed = tf.clip_by_value(changed, 1 / self.largest, self.largest)
        due = tf.equal(updates % self.update_period, 0)
        return tf.where(due, changed, loss_scaling)
