"""graphcore/popart tests/integration/operators_test/squeeze_test.py: Squeeze of all unit
axes (empty axes), of given and of unsorted axes, and gradients (Cpu)."""

import numpy as np
import pytest

import popart


def _run(op_tester, shape, axes, train):
    d1 = np.random.rand(*shape).astype(np.float32)
    expected = np.squeeze(d1, axis=tuple(axes) if axes else None)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        o = builder.aiOnnx.squeeze([i1], axes=axes)
        builder.addOutputTensor(o)
        return [o, g + i1, g + o] if train else [o]

    def reference(ref_data):
        if not train:
            return [expected]
        return [expected, ref_data.getOutputTensorGrad(0).reshape(d1.shape), None]

    op_tester.setPatterns(["PreUniRepl"] if train else [], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train" if train else "infer")


@pytest.mark.follows("test_squeeze")
def test_squeeze(op_tester):
    _run(op_tester, [2, 1, 3, 4, 1], [], False)


@pytest.mark.follows("test_squeeze_limited")
def test_squeeze_limited(op_tester):
    _run(op_tester, [2, 1, 3, 4, 1], [1], False)


@pytest.mark.follows("test_squeeze_unsorted_axes")
def test_squeeze_unsorted_axes(op_tester):
    _run(op_tester, [2, 1, 3, 1, 4, 1], [5, 1], False)


@pytest.mark.follows("test_squeeze_grad")
def test_squeeze_grad(op_tester):
    _run(op_tester, [2, 1, 3, 4, 1], [], True)


@pytest.mark.follows("test_squeeze_limited_grad")
def test_squeeze_limited_grad(op_tester):
    _run(op_tester, [2, 1, 3, 4, 1], [1], True)
