"""Automatic loss scaling of a training session (`SessionOptions.automaticLossScalingSettings`),
as the original's AutomaticLossScale transform does it
(willow/src/transforms/automaticlossscaling.cpp, willow/src/popx/op/lossscaleupdatex.cpp):

- The optimizer's loss scaling (`lossScaling_<TYPE>`, non-const) is left as the user set it;
  a float32 variable `lossScaleUpdateFactor`, starting at 1, multiplies it. Their product,
  `finalLossScale` (float32: automatic loss scaling makes the loss scale tensor float32, as
  `ensureFp32LossScaleTensor` does), seeds the backward pass and is divided out of the
  gradients before the weight update.
- Every micro-batch, the gradients it tracks are sorted, by absolute value, into a two-bin
  histogram whose edge is `binEdgeLocation` times the largest value of their type; the counts
  are summed over the tracked tensors, the micro-batches of an accumulation group and the
  replicas.
- After the weight update, if the upper bin holds more than `thresholdUpperCountProportion`
  of the counted elements, the factor is halved, otherwise doubled. With `updatePeriod` > 1 it
  changes after weight updates 0, P, 2P, ... only (the original's counter starts at -1 and is
  incremented modulo P before the op it guards). The factor is not clipped.

What it tracks (`gradientTensorTrackingMethod`): the float16 gradients PopART's autodiff makes
on the way from the loss to the trained weights: of the inputs of MatMul/Conv/Gemm ops
(`ConvAndMatmulGradients`), of the inputs of every op whose gradient is no mere view change
and needs no weight (`AllNonViewChangingGradientTensors`, the default), or of the tensors
`toTrackTensors` names (`GradientsOfUserSpecifiedTensors`, of any floating type).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import tensorflow as tf

from openipu._src.popart.errors import popart_exception
from openipu._src.popart.lowering.registry import ONNX_DOMAIN, canonical_domain
from openipu._src.popart.options.enums import GradientTensorTrackingMethod
from openipu._src.popart.options.settings import AutomaticLossScalingSettings

FINAL_LOSS_SCALE_ID = "finalLossScale"
UPDATE_FACTOR_ID = "lossScaleUpdateFactor"  # willow/include/popart/tensornames.hpp
STATISTICS_ID = "Accum___autoLossScaleStats"  # with gradient accumulation only

_TRANSFORM = "[AutomaticLossScale transform]"
_CONV_AND_MATMUL = frozenset({"MatMul", "Conv", "Gemm"})
# Ops whose gradient is a view change of their output's (the same statistics: the original
# does not track it).
_VIEW_CHANGING = frozenset(
    {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Concat", "Split"}
)


def check_settings(settings: AutomaticLossScalingSettings) -> None:
    """The checks the original makes while it builds the graph (the threshold's when it
    lowers LossScaleUpdateOp, on prepareDevice; here earlier, with its words)."""
    if not 0 <= settings.binEdgeLocation <= 1:
        raise popart_exception(
            f"{_TRANSFORM} Out of range value for 'binEdgeLocation'. The current value is "
            f"{settings.binEdgeLocation}, but it should be in the range [0, 1]."
        )
    if not 0 <= settings.thresholdUpperCountProportion <= 1:
        raise popart_exception(
            "Out of range value for 'thresholdUpperCountProportion'. The current value is "
            f"{settings.thresholdUpperCountProportion}, but it should be in the range [0, 1]."
        )
    if settings.updatePeriod < 1:
        raise popart_exception(
            f"{_TRANSFORM} automaticLossScalingSettings.updatePeriod must be >= 1, got "
            f"{settings.updatePeriod}"
        )
    user = GradientTensorTrackingMethod.GradientsOfUserSpecifiedTensors
    if settings.toTrackTensors is not None and settings.gradientTensorTrackingMethod is not user:
        raise popart_exception(
            f"{_TRANSFORM} toTrackTensors has been set, but gradientTensorTrackingMethod has "
            "not been set to 'GradientTensorTrackingMethod::GradientsOfUserSpecifiedTensors'."
        )
    if settings.gradientTensorTrackingMethod is user and settings.toTrackTensors is None:
        raise popart_exception(
            f"{_TRANSFORM} gradientTensorTrackingMethod set to "
            "'GradientTensorTrackingMethod::GradientsOfUserSpecifiedTensors' but "
            "'toTrackTensors' has not been set"
        )


def _loss_gradient_inputs(graph: onnx.GraphProto, loss_id: str) -> set[str]:
    """The tensors whose gradients the loss's grad op makes: it reads the loss scaling,
    an optimizer tensor, so the original does not track them. An NllLoss of a Softmax has
    one grad op for both (PopART's SoftmaxGradDirect pattern)."""
    producers = {output: node for node in graph.node for output in node.output}
    loss_node = producers.get(loss_id)
    if loss_node is None:
        return set()
    found = {name for name in loss_node.input if name}
    if loss_node.op_type == "Nll" and loss_node.input:
        softmax = producers.get(loss_node.input[0])
        if softmax is not None and softmax.op_type == "Softmax":
            found |= {name for name in softmax.input if name}
    return found


def automatically_tracked(
    graph: onnx.GraphProto,
    loss_id: str,
    method: GradientTensorTrackingMethod,
    with_gradient: set[str],
    initializers: set[str],
    is_float16: dict[str, bool],
) -> list[str]:
    """The tensors whose gradients the original tracks by `method`; `with_gradient` holds
    those autodiff gives a gradient (on a path from a trained weight to the loss)."""
    tracked: dict[str, None] = {}
    excluded = _loss_gradient_inputs(graph, loss_id)
    for node in graph.node:
        if canonical_domain(node.domain) != ONNX_DOMAIN and method is not (
            GradientTensorTrackingMethod.AllNonViewChangingGradientTensors
        ):
            continue
        if method is GradientTensorTrackingMethod.ConvAndMatmulGradients:
            if node.op_type not in _CONV_AND_MATMUL:
                continue
        elif node.op_type in _VIEW_CHANGING and canonical_domain(node.domain) == ONNX_DOMAIN:
            continue
        for index, name in enumerate(node.input):
            if name not in with_gradient or name in excluded or not is_float16.get(name, False):
                continue
            others = [other for i, other in enumerate(node.input) if i != index and other]
            if node.op_type not in _CONV_AND_MATMUL and any(o in initializers for o in others):
                # Its grad op would read a weight, which the original does not track (a
                # MatMul's or Conv's reads it transposed or flipped: that one it tracks).
                continue
            tracked[name] = None
    return list(tracked)


@dataclass(frozen=True)
class AutomaticLossScaling:
    """The settings of automatic loss scaling and the tensors whose gradients it tracks."""

    tracked: tuple[str, ...]
    bin_edge_location: float
    threshold: float
    update_period: int

    @classmethod
    def plan(
        cls, settings: AutomaticLossScalingSettings, tracked: list[str]
    ) -> AutomaticLossScaling:
        if not tracked:
            raise popart_exception(
                f"{_TRANSFORM} No tracked gradient tensors of type fp16 were found."
            )
        return cls(
            tuple(tracked),
            settings.binEdgeLocation,
            settings.thresholdUpperCountProportion,
            settings.updatePeriod,
        )

    def histogram(self, gradients: list[tf.Tensor]) -> tf.Tensor:
        """[lower, upper] counts of the elements of `gradients` (float32, summed)."""
        upper, total = [], 0
        for gradient in gradients:
            edge = self.bin_edge_location * float(gradient.dtype.max)
            magnitude = tf.abs(tf.cast(gradient, tf.float32))
            # An overflowed (inf or nan) element belongs to the upper bin.
            beyond = tf.logical_or(magnitude >= edge, tf.logical_not(tf.math.is_finite(magnitude)))
            upper.append(tf.reduce_sum(tf.cast(beyond, tf.float32)))
            total += gradient.shape.num_elements()
        upper_count = tf.add_n(upper)
        return tf.stack([total - upper_count, upper_count])

    def next_factor(
        self, factor: tf.Tensor, counts: tf.Tensor, updates_done: tf.Tensor
    ) -> tf.Tensor:
        """The update factor after weight update number `updates_done` (counted from 0)."""
        lower, upper = counts[0], counts[1]
        # upper / (upper + lower) > t, as the original computes it: upper > lower * t / (1 - t).
        with np.errstate(divide="ignore"):
            ratio = np.float32(self.threshold) / np.float32(1 - self.threshold)
        scale_down = upper > lower * ratio
        changed = tf.where(scale_down, factor / 2, factor * 2)
        due = tf.equal(updates_done % self.update_period, 0)
        return tf.where(due, changed, factor)
