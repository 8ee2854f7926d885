"""The original's matmul broadcasting scenario (operators_test/
matmul_test_broadcasting_base.py): numpy-style MatMul for pairs of shapes, inference and
training, against numpy and its analytic gradients."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from popart_op_checks import unbroadcast

import popart


def matmul_grads(a: np.ndarray, b: np.ndarray, upstream: np.ndarray) -> tuple[np.ndarray, ...]:
    """Gradients of np.matmul(a, b) (1-D operands promoted as numpy does)."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g = np.asarray(upstream)
    if b.ndim == 1:
        g = g[..., None]
    if a.ndim == 1:
        g = np.expand_dims(g, -2)
    grad_a = g @ np.swapaxes(b2, -1, -2)
    grad_b = np.swapaxes(a2, -1, -2) @ g
    grad_a = unbroadcast(grad_a, a2.shape).reshape(a.shape)
    grad_b = unbroadcast(grad_b, b2.shape).reshape(b.shape)
    return grad_a.astype(a.dtype), grad_b.astype(b.dtype)


def broadcasting_kind(lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, int, bool, bool]:
    """What numpy's MatMul broadcasting does for a pair of shapes: each operand's rank
    class (1-D, 2-D, batched) and whether lhs, rhs or both broadcast over batch dims."""
    a = list(lhs) if len(lhs) > 1 else [1, *lhs]
    b = list(rhs) if len(rhs) > 1 else [*rhs, 1]
    width = max(len(a), len(b)) - 2
    batch_a = [1] * (width - len(a) + 2) + a[:-2]
    batch_b = [1] * (width - len(b) + 2) + b[:-2]
    lhs_broadcasts = any(x == 1 < y for x, y in zip(batch_a, batch_b, strict=True))
    rhs_broadcasts = any(y == 1 < x for x, y in zip(batch_a, batch_b, strict=True))
    return (min(len(lhs), 3), min(len(rhs), 3), lhs_broadcasts, rhs_broadcasts)


def representative(
    shapes: Sequence[tuple[list[int], list[int]]],
) -> list[tuple[list[int], list[int]]]:
    """The first pair of each broadcasting kind, in the original's order: the original's
    generated lists repeat kinds with only other sizes, and each pair costs a compile."""
    kept: dict[tuple[int, int, bool, bool], tuple[list[int], list[int]]] = {}
    for lhs, rhs in shapes:
        kept.setdefault(broadcasting_kind(lhs, rhs), (lhs, rhs))
    return list(kept.values())


def check_matmul_broadcasting(op_tester: Any, shapes: Sequence[tuple[list[int], list[int]]]):
    """One pair of each broadcasting kind (`representative`), all pairs in one graph (one
    inference and one training session rather than two sessions per pair): each MatMul's
    output, and in training its upstream gradient and both operand gradients, checked
    against numpy. The training loss sums the flattened outputs, whose gradients are
    anchored per MatMul and feed the reference as the original's do."""
    g = popart.reservedGradientPrefix()
    zeros = np.zeros(2, np.float32)
    shapes = representative(shapes)
    for step_type in ("infer", "train"):
        cases = [
            (np.random.rand(*lhs).astype(np.float32), np.random.rand(*rhs).astype(np.float32))
            for lhs, rhs in shapes
        ]

        def init_builder(builder, cases=cases, step_type=step_type):
            anchors, flat = [], []
            for d1, d2 in cases:
                scalar = np.matmul(d1, d2).shape == ()
                i1, i2 = builder.addInputTensor(d1), builder.addInputTensor(d2)
                t1 = builder.aiOnnx.matmul([i1, i2])
                # A loss can't take the scalar of two 1-D operands: the original adds zeros.
                out = builder.aiOnnx.add([builder.addInputTensor(zeros), t1]) if scalar else t1
                builder.addOutputTensor(out)
                anchors += [out, t1] if scalar else [out]
                if step_type == "train":
                    anchors += [g + out, g + i1, g + i2]
                    flat.append(builder.reshape_const(builder.aiOnnx, [out], [-1]))
            if step_type == "infer":
                return anchors
            # The loss's input leads (op_tester's identity loss takes anchor 0).
            return [builder.aiOnnx.concat(flat, 0), *anchors]

        def reference(ref_data, cases=cases, step_type=step_type):
            expected: list[Any] = [] if step_type == "infer" else [None]
            for index, (d1, d2) in enumerate(cases):
                r = np.matmul(d1, d2)
                scalar = r.shape == ()
                expected += [zeros + r, np.array(r)] if scalar else [r]
                if step_type == "train":
                    upstream = ref_data.getOutputTensorGrad(index)
                    r_grad = upstream.sum() if scalar else upstream
                    expected += [upstream, *matmul_grads(d1, d2, r_grad)]
            return expected

        op_tester.rtol, op_tester.atol = 1e-5, 1e-6
        # Summed, so every upstream gradient is 1 (not 1/size): tolerances as tight as before.
        op_tester.lossReduction = popart.ReductionType.Sum
        op_tester.patterns = (
            popart.Patterns(popart.PatternsLevel.Minimal)
            .enablePattern("MatMulLhsGradOp", True)
            .enablePattern("MatMulRhsGradOp", True)
        )
        op_tester.run(init_builder, reference, step_type)
