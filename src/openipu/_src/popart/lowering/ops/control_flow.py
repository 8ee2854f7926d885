"""Control flow: If, Loop, Scan. Their subgraphs are lowered recursively and see outer values.

A condition or trip count known when tracing gives plain Python control flow (what eager mode
always does); otherwise If becomes ``tf.cond`` and Loop ``tf.while_loop``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.popart.lowering.op import Op, RunContext, static_value
from openipu._src.popart.lowering.registry import register_op


@register_op("If", since=(1, 11, 13, 16, 19, 21, 23, 24, 25))
class If(Op):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        scope = context.scope
        then_branch, else_branch = self.subgraphs["then_branch"], self.subgraphs["else_branch"]
        condition = static_value(inputs[0])
        if condition is not None:
            branch = then_branch if bool(np.asarray(condition).reshape(-1)[0]) else else_branch
            return tuple(branch.call(context, scope, []))
        return tuple(
            tf.cond(
                tf.reshape(tf.cast(inputs[0], tf.bool), []),
                lambda: then_branch.call(context, scope, []),
                lambda: else_branch.call(context, scope, []),
            )
        )


def _relaxed_shape(value: tf.Tensor) -> tf.TensorShape:
    return tf.TensorShape([None] * value.shape.rank) if value.shape.rank is not None else None


def _iteration_context(context: RunContext, iteration: Any) -> RunContext:
    """The body's context for one iteration: its random ops draw new numbers each time.

    PopART's RandomSetup (willow/src/transforms/randomsetup.cpp) passes the loop body a seed
    that is updated in every iteration; folding in the iteration number does the same.
    """
    return context.salted(iteration)


@register_op("Loop", since=(1, 11, 13, 16, 19, 21, 23, 24, 25))
class Loop(Op):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        body = self.subgraphs["body"]
        scope = context.scope
        max_trips, condition, *carried = inputs
        carried_count = len(carried)
        if tf.executing_eagerly():
            return self._run_eagerly(context, scope, body, max_trips, condition, carried)
        if any(isinstance(value, list) or value is None for value in carried):
            raise self.error("loop-carried sequences are only supported in eager mode")
        return self._run_while_loop(
            context, scope, body, max_trips, condition, carried, carried_count
        )

    def _run_eagerly(self, context, scope, body, max_trips, condition, carried):
        trips = int(np.asarray(max_trips.numpy()).reshape(())) if max_trips is not None else None
        keep_going = bool(condition.numpy()) if condition is not None else True
        scanned: list[list[tf.Tensor]] = []
        iteration = 0
        while keep_going and (trips is None or iteration < trips):
            outputs = body.call(
                _iteration_context(context, iteration),
                scope,
                [tf.constant(iteration, tf.int64), tf.constant(keep_going), *carried],
            )
            keep_going = bool(np.asarray(outputs[0].numpy()).reshape(-1)[0])
            carried = outputs[1 : 1 + len(carried)]
            scanned.append(outputs[1 + len(carried) :])
            iteration += 1
        scan_count = len(body.output_names) - 1 - len(carried)
        scan_outputs = [
            tf.stack([step[index] for step in scanned]) if scanned else tf.zeros([0])
            for index in range(scan_count)
        ]
        return (*carried, *scan_outputs)

    def _run_while_loop(self, context, scope, body, max_trips, condition, carried, carried_count):
        trips = (
            tf.cast(tf.reshape(max_trips, []), tf.int64)
            if max_trips is not None
            else tf.constant(np.iinfo(np.int64).max, tf.int64)
        )
        keep_going = (
            tf.reshape(tf.cast(condition, tf.bool), [])
            if condition is not None
            else tf.constant(True)
        )
        # The scan outputs' dtypes are found by tracing the body once outside the loop.
        probe = body.call(
            _iteration_context(context, 0), scope, [tf.constant(0, tf.int64), keep_going, *carried]
        )
        arrays = [
            tf.TensorArray(value.dtype, size=0, dynamic_size=True, infer_shape=False)
            for value in probe[1 + carried_count :]
        ]

        def loop_condition(iteration, going, *_):
            return tf.logical_and(going, iteration < trips)

        def loop_body(iteration, going, carried_values, arrays):
            outputs = body.call(
                _iteration_context(context, iteration), scope, [iteration, going, *carried_values]
            )
            new_arrays = [
                array.write(tf.cast(iteration, tf.int32), value)
                for array, value in zip(arrays, outputs[1 + carried_count :], strict=True)
            ]
            going = tf.reshape(tf.cast(outputs[0], tf.bool), [])
            return iteration + 1, going, list(outputs[1 : 1 + carried_count]), new_arrays

        _, _, final_carried, final_arrays = tf.while_loop(
            loop_condition,
            loop_body,
            (tf.constant(0, tf.int64), keep_going, list(carried), arrays),
            shape_invariants=(
                tf.TensorShape([]),
                tf.TensorShape([]),
                [_relaxed_shape(value) for value in carried],
                [tf.TensorShape(None) for _ in arrays],
            ),
        )
        return (*final_carried, *[array.stack() for array in final_arrays])


_FIRST_ONNX_ONLY_SCAN = 16  # the first Scan version after PopART's opsets


@register_op("Scan", since=(9, 11, 16, 19, 21, 23, 24, 25))
class Scan(Op):
    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        body = self.subgraphs["body"]
        scan_count = self.attrs.num_scan_inputs
        states, scanned = list(inputs[: len(inputs) - scan_count]), list(inputs[-scan_count:])
        # PopART's ScanOp is Scan-9 and Scan-11 (willow/src/op/scan.cpp); the later versions,
        # which only openipu runs, and Scans of ONNX's function bodies keep ONNX's shapes.
        popart_shapes = self.opset_version < _FIRST_ONNX_ONLY_SCAN and not self.onnx_semantics
        return scan_loop(self, context, body, states, scanned, popart_shapes=popart_shapes)


@register_op("Scan", since=8)
class ScanWithBatch(Op):
    """Opset 8 Scan: a leading batch axis and an optional sequence_lens input."""

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        body = self.subgraphs["body"]
        scan_count = self.attrs.num_scan_inputs
        sequence_lens, *rest = inputs
        states, scanned = rest[: len(rest) - scan_count], rest[-scan_count:]
        batch = scanned[0].shape[0]
        scope = context.scope
        per_batch = []
        for index in range(batch):
            row_states = [state[index] for state in states]
            row_scanned = [value[index] for value in scanned]
            if sequence_lens is not None:
                length = int(self.static_ints(sequence_lens, "sequence_lens")[index])
                row_scanned = [value[:length] for value in row_scanned]
            per_batch.append(scan_loop(self, context, body, row_states, row_scanned, scope))
        return tuple(tf.stack([row[i] for row in per_batch]) for i in range(len(per_batch[0])))


def scan_loop(
    op: Op, context: RunContext, body, states, scanned, scope=None, popart_shapes: bool = False
) -> tuple[Any, ...]:
    """Run ``body`` over the scan axis of ``scanned`` (static length), threading ``states``.

    With ``popart_shapes``, slices and scan outputs are shaped as PopART's ScanOp shapes them
    (willow/src/op/scan.cpp): a 1-D scan input gives the body [1] slices (ONNX: scalars), and
    the body's scan outputs are concatenated along their output axis, whose size becomes the
    trip count times the body's (ONNX stacks them along a new axis).
    """
    attrs = op.attrs
    scope = context.scope if scope is None else scope
    scan_count = len(scanned)
    input_axes = list(attrs.get("scan_input_axes") or [0] * scan_count)
    input_directions = list(attrs.get("scan_input_directions") or [0] * scan_count)
    prepared = []
    for value, axis, direction in zip(scanned, input_axes, input_directions, strict=True):
        axis = axis + value.shape.rank if axis < 0 else axis
        value = tf.experimental.numpy.moveaxis(value, axis, 0)
        prepared.append(tf.reverse(value, [0]) if direction else value)
    length = prepared[0].shape[0]
    if length is None:
        raise op.error("the scan axis length must be known when tracing")

    def step_slice(value: tf.Tensor, step: int) -> tf.Tensor:
        keeps_axis = popart_shapes and value.shape.rank == 1
        return value[step : step + 1] if keeps_axis else value[step]

    step_outputs = []
    for step in range(length):
        outputs = body.call(
            context, scope, [*states, *[step_slice(value, step) for value in prepared]]
        )
        states = outputs[: len(states)]
        step_outputs.append(outputs[len(states) :])
    output_count = len(body.output_names) - len(states)
    output_axes = list(attrs.get("scan_output_axes") or [0] * output_count)
    output_directions = list(attrs.get("scan_output_directions") or [0] * output_count)
    results = []
    for index in range(output_count):
        per_step = [outputs[index] for outputs in step_outputs]
        if output_directions[index]:
            per_step = per_step[::-1]
        axis = output_axes[index]
        if popart_shapes:
            rank = per_step[0].shape.rank
            results.append(tf.concat(per_step, axis=axis + rank if axis < 0 else axis))
            continue
        stacked = tf.stack(per_step)
        axis = axis + stacked.shape.rank if axis < 0 else axis
        results.append(tf.experimental.numpy.moveaxis(stacked, 0, axis))
    return (*states, *results)
