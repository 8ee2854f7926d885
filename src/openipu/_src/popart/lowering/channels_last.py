"""Channels-last evaluation of chains of spatial ops.

ONNX lays images out channels-first (N, C, H, W). TensorFlow's CPU convolution and pooling
kernels are channels-last (N, H, W, C), and so are oneDNN's fusions of a convolution with
its bias and activation. Transposing in and out around every convolution and pool would
cost two transposes per op and hide the bias and activation from those fusions.

So ops that can compute channels-last do so, and their results stay channels-last for the
next op: convolutions and pools always (`Op.run_channels_last`; they would transpose
anyway), batch normalization and elementwise ops (`Op.elementwise`) when an input already
is channels-last. A chain such as Conv -> Relu -> MaxPool -> Conv is then transposed once
where it starts and once where a value leaves it. Every value also gets its channels-first
form in the scope, as a transpose that only runs if something reads it (an op that needs
channels-first, a graph output, a fetched anchor): unread ops are pruned from the program.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from openipu._src.popart.lowering.op import Op, RunContext, as_outputs
from openipu._src.popart.lowering.spatial import channels_first, channels_last

# Channels-first layouts start at rank 3 (N, C, one spatial dim).
_MIN_RANK = 3


class ChannelsLastValues:
    """The channels-last forms of the values of one graph evaluation, by tensor name."""

    def __init__(self) -> None:
        self._values: dict[str, tf.Tensor] = {}

    def run(
        self, op: Op, context: RunContext, names: Sequence[str], arguments: list[Any]
    ) -> tuple[Any, ...] | None:
        """The op's outputs (channels-first, as the scope holds them) if it ran channels-last,
        else None (the caller runs it as usual)."""
        if _is_elementwise(op):
            results = self._run_elementwise(op, context, names, arguments)
        elif type(op).run_channels_last is not Op.run_channels_last:
            results = self._run_spatial(op, context, names, arguments)
        else:
            results = None
        if results is None:
            return None
        first, *others = results
        name = op.node.output[0] if op.node.output else ""
        if name:
            self._values[name] = first
        return (channels_first(first), *others)

    def _channels_last_input(self, name: str, value: Any) -> tf.Tensor:
        known = self._values.get(name)
        return known if known is not None else channels_last(value)

    def _run_spatial(
        self, op: Op, context: RunContext, names: Sequence[str], arguments: list[Any]
    ) -> tuple[Any, ...] | None:
        x = arguments[0] if arguments else None
        if not _is_image(x):
            return None
        if names[0] not in self._values and not op.channels_last_always:
            return None
        converted = [self._channels_last_input(names[0], x), *arguments[1:]]
        results = op.run_channels_last(context, converted)
        return None if results is None else as_outputs(results)

    def _run_elementwise(
        self, op: Op, context: RunContext, names: Sequence[str], arguments: list[Any]
    ) -> tuple[Any, ...] | None:
        known = [self._values[name] for name in names if name in self._values]
        if not known or len(op.node.output) != 1:
            return None
        rank = known[0].shape.rank
        if any(not isinstance(a, tf.Tensor) or a.shape.rank is None for a in arguments):
            return None
        if any(a.shape.rank > rank for a in arguments):
            return None  # the result has more dims than the channels-last value: not an image
        converted = []
        for name, argument in zip(names, arguments, strict=True):
            if name in self._values:
                converted.append(self._values[name])
                continue
            # Broadcasting aligns trailing dims: pad to the full rank, then permute alike.
            converted.append(channels_last(_padded_to_rank(argument, rank)))
        return as_outputs(op.run(context, converted))


def _is_elementwise(op: Op) -> bool:
    # Opsets < 7 broadcast with an axis attribute, which counts channels-first dims.
    return op.elementwise and not op.attrs.get("broadcast")


def _is_image(value: Any) -> bool:
    return (
        isinstance(value, tf.Tensor)
        and value.shape.rank is not None
        and value.shape.rank >= _MIN_RANK
        and value.shape[1:].is_fully_defined()
    )


def _padded_to_rank(tensor: tf.Tensor, rank: int) -> tf.Tensor:
    missing = rank - tensor.shape.rank
    if not missing:
        return tensor
    dims = tensor.shape.as_list()
    if None in dims:
        return tf.reshape(tensor, tf.concat([tf.ones([missing], tf.int32), tf.shape(tensor)], 0))
    return tf.reshape(tensor, [1] * missing + dims)
