"""Sequences (Python lists of tensors) and optionals (a value, or None when empty)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from openipu._src.popart.lowering.dtypes import ONNX_TO_TF
from openipu._src.popart.lowering.op import Op, RunContext
from openipu._src.popart.lowering.registry import register_op
from openipu._src.popart.lowering.tensor_utils import normalize_axis


def position(op: Op, index: tf.Tensor | None, length: int, default: int) -> int:
    if index is None:
        return default
    value = op.static_ints(index, "position")[0]
    return value + length if value < 0 else value


@register_op("SequenceConstruct", since=11)
class SequenceConstruct(Op):
    def compute(self, *tensors: tf.Tensor) -> list[tf.Tensor]:
        return list(tensors)


@register_op("SequenceEmpty", since=11)
class SequenceEmpty(Op):
    def compute(self) -> list[tf.Tensor]:
        return []


@register_op("SequenceInsert", since=11)
class SequenceInsert(Op):
    def compute(
        self, sequence: list[tf.Tensor], tensor: tf.Tensor, index: tf.Tensor | None = None
    ) -> list[tf.Tensor]:
        at = position(self, index, len(sequence), len(sequence))
        return [*sequence[:at], tensor, *sequence[at:]]


@register_op("SequenceAt", since=11)
class SequenceAt(Op):
    def compute(self, sequence: list[tf.Tensor], index: tf.Tensor) -> tf.Tensor:
        return sequence[position(self, index, len(sequence), 0)]


@register_op("SequenceErase", since=11)
class SequenceErase(Op):
    def compute(self, sequence: list[tf.Tensor], index: tf.Tensor | None = None) -> list[tf.Tensor]:
        at = position(self, index, len(sequence), len(sequence) - 1)
        return [*sequence[:at], *sequence[at + 1 :]]


@register_op("SequenceLength", since=11)
class SequenceLength(Op):
    def compute(self, sequence: list[tf.Tensor]) -> tf.Tensor:
        return tf.constant(len(sequence), tf.int64)


@register_op("SplitToSequence", since=11)
class SplitToSequence(Op):
    def compute(self, x: tf.Tensor, split: tf.Tensor | None = None) -> list[tf.Tensor]:
        axis = normalize_axis(self.attrs.axis, x.shape.rank)
        if split is None:
            pieces = tf.split(x, x.shape[axis], axis=axis)
            if not self.attrs.keepdims:
                pieces = [tf.squeeze(piece, axis) for piece in pieces]
            return pieces
        sizes = self.static_ints(split, "split")
        if split.shape.rank == 0:
            length = x.shape[axis]
            sizes = [sizes[0]] * (length // sizes[0]) + (
                [length % sizes[0]] if length % sizes[0] else []
            )
        return tf.split(x, sizes, axis=axis)


@register_op("ConcatFromSequence", since=11)
class ConcatFromSequence(Op):
    def compute(self, sequence: list[tf.Tensor]) -> tf.Tensor:
        if self.attrs.new_axis:
            axis = normalize_axis(self.attrs.axis, sequence[0].shape.rank + 1)
            return tf.stack(sequence, axis=axis)
        return tf.concat(sequence, axis=normalize_axis(self.attrs.axis, sequence[0].shape.rank))


@register_op("SequenceMap", since=17)
class SequenceMap(Op):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        body, scope = self.subgraphs["body"], context.scope
        length = len(inputs[0])
        results: list[list[tf.Tensor]] = [[] for _ in body.output_names]
        for index in range(length):
            arguments = [value[index] if isinstance(value, list) else value for value in inputs]
            for collected, output in zip(
                results, body.call(context, scope, arguments), strict=True
            ):
                collected.append(output)
        return tuple(results)


@register_op("Optional", since=15)
class Optional(Op):
    def compute(self, value: Any = None) -> Any:
        return value


@register_op("OptionalHasElement", since=(15, 18))
class OptionalHasElement(Op):
    def compute(self, value: Any = None) -> tf.Tensor:
        return tf.constant(value is not None)


@register_op("OptionalGetElement", since=(15, 18))
class OptionalGetElement(Op):
    def compute(self, value: Any) -> Any:
        if value is None:
            raise self.error("the optional input is empty")
        return value


def empty_sequence_dtype(op: Op) -> tf.DType:
    return ONNX_TO_TF[op.attrs.get("dtype") or 1]
