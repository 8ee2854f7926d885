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


def check_matmul_broadcasting(op_tester: Any, shapes: Sequence[tuple[list[int], list[int]]]):
    g = popart.reservedGradientPrefix()
    zeros = np.zeros(2, np.float32)
    for step_type in ("infer", "train"):
        for lhs, rhs in shapes:
            d1 = np.random.rand(*lhs).astype(np.float32)
            d2 = np.random.rand(*rhs).astype(np.float32)
            scalar = np.matmul(d1, d2).shape == ()

            def init_builder(builder, d1=d1, d2=d2, scalar=scalar, step_type=step_type):
                i1, i2 = builder.addInputTensor(d1), builder.addInputTensor(d2)
                t1 = builder.aiOnnx.matmul([i1, i2])
                out = builder.aiOnnx.add([builder.addInputTensor(zeros), t1]) if scalar else t1
                builder.addOutputTensor(out)
                anchors = [out, t1] if scalar else [out]
                return anchors + ([g + out, g + i1, g + i2] if step_type == "train" else [])

            def reference(ref_data, d1=d1, d2=d2, scalar=scalar, step_type=step_type):
                r = np.matmul(d1, d2)
                outputs = [zeros + r, np.array(r)] if scalar else [r]
                if step_type == "infer":
                    return outputs
                upstream = ref_data.getOutputTensorGrad(0)
                r_grad = upstream.sum() if scalar else upstream
                return outputs + [upstream, *matmul_grads(d1, d2, r_grad)]

            op_tester.rtol, op_tester.atol = 1e-5, 1e-6
            op_tester.patterns = (
                popart.Patterns(popart.PatternsLevel.Minimal)
                .enablePattern("MatMulLhsGradOp", True)
                .enablePattern("MatMulRhsGradOp", True)
            )
            op_tester.run(init_builder, reference, step_type)
