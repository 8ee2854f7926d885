"""graphcore/popart tests/integration/operators_test/pow_test.py: Pow forward (NaN where
numpy gives NaN), broadcast, and its gradients with respect to base and exponent, also at
the corner cases (zero, infinities, NaN), against numpy with torch's gradient rules (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import unbroadcast

import popart


def _infer(op_tester, d1, d2):
    def init_builder(builder):
        o = builder.aiOnnx.pow([builder.addInputTensor(d1), builder.addInputTensor(d2)])
        builder.addOutputTensor(o)
        return [o]

    with np.errstate(invalid="ignore"):
        expected = np.power(d1, d2)
    op_tester.equal_nan = True
    op_tester.run(init_builder, lambda _: [expected], step_type="infer")


@pytest.mark.follows("test_pow")
def test_pow(op_tester):
    _infer(op_tester, np.random.randn(2).astype(np.float32), np.random.randn(2).astype(np.float32))


@pytest.mark.follows("test_broadcast_pow")
def test_broadcast_pow(op_tester):
    _infer(
        op_tester, np.random.randn(2, 2).astype(np.float32), np.random.randn(2).astype(np.float32)
    )


def _torch_pow_grads(a, b, d__o):
    """torch's rules: d/da = b * a^(b-1), zero where b == 0; d/db = a^b * log(a), zero
    where a == 0 and b >= 0."""
    with np.errstate(all="ignore"):
        out = np.power(a, b)
        da = np.where(b == 0, 0.0, d__o * (b * np.power(a, b - 1)))
        db = np.where((a == 0) & (b >= 0), 0.0, d__o * (out * np.log(a)))
    return out, da, db


def _pow_grad(op_tester, precision, d1, d2):
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(d1.astype(precision))
        i2 = builder.addInputTensor(d2.astype(precision))
        o = builder.aiOnnx.pow([i1, i2])
        builder.addOutputTensor(o)
        return [o, g + i1, g + i2, g + o]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0).astype(np.float64)
        assert not np.isnan(d__o).any()
        a, b = np.broadcast_arrays(d1.astype(np.float32), d2.astype(np.float32))
        out, da, db = _torch_pow_grads(a.astype(np.float64), b.astype(np.float64), d__o)
        return [
            out.astype(precision),
            unbroadcast(da, d1.shape).astype(precision),
            unbroadcast(db, d2.shape).astype(precision),
            None,
        ]

    if precision == np.float16:
        op_tester.atol = 2e-03
    op_tester.rtol = 1e-4
    op_tester.equal_nan = True
    op_tester.setPatterns(
        ["PreUniRepl", "PowArg0GradOp", "PowArg1GradOp"], enableRuntimeAsserts=False
    )
    op_tester.run(init_builder, reference, "train")


_INF, _NAN = float("inf"), float("nan")
_GRID = [-0.5, 0, 0.5]
_EXPS = [-0.5, 0, 0.5, 1, 1.5]
_SPECIAL = [-_INF, _INF, _NAN]
CORNER_BASE = np.array(
    [a for a in _GRID for _ in _EXPS]
    + [a for a in _GRID for _ in (-2, 2)]
    + [a for a in _GRID for _ in (-_INF, _INF)]
    + [a for a in _SPECIAL for _ in (-2, -0.5, 0, 0.5, 1, 1.5, 2)]
    + [-2, -0.5, 0, 0.5, 1, 1.5, 2, _NAN, _NAN, _NAN, -_INF, _INF]
)
CORNER_EXPONENT = np.array(
    [b for _ in _GRID for b in _EXPS]
    + [b for _ in _GRID for b in (-2, 2)]
    + [b for _ in _GRID for b in (-_INF, _INF)]
    + [b for _ in _SPECIAL for b in (-2, -0.5, 0, 0.5, 1, 1.5, 2)]
    + [_NAN] * 8
    + [-_INF, _INF, _NAN, _NAN]
)


@pytest.mark.follows("test_pow_grad_corner_cases")
def test_pow_grad_corner_cases(op_tester):
    _pow_grad(op_tester, np.float32, CORNER_BASE, CORNER_EXPONENT)


@pytest.mark.follows("test_pow_grad")
@pytest.mark.parametrize("precision", [np.float32, np.float16])
def test_pow_grad(op_tester, precision):
    _pow_grad(op_tester, precision, np.random.randn(4, 1, 4), np.random.randn(3, 1))
