"""graphcore/popart tests/integration/operators_test/sort_test.py: ai.graphcore Sort along
every axis, ascending or descending, with indices and the values' gradient, and a stable
sort of ties (Cpu)."""

import numpy as np
import pytest

import popart


def _sort_reference(data, axis, descending, stable, upstream=None):
    kind = "stable" if stable else None
    # A stable descending order keeps ties in input order: sort the negation stably.
    indices = np.argsort(-data if descending else data, axis=axis, kind=kind)
    values = np.take_along_axis(data, indices, axis=axis)
    result = [values, indices.astype(np.int32)]
    if upstream is not None:
        grad = np.zeros_like(data)
        np.put_along_axis(grad, indices, upstream, axis=axis)
        result += [grad, None]
    return result


def _sort(op_tester, data, axis, descending, stable=False, backward=False):
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i = builder.addInputTensor(data)
        values, indices = builder.aiGraphcore.sort(
            [i], axis=axis, descending=int(descending), stable=int(stable)
        )
        builder.addOutputTensor(values)
        builder.addOutputTensor(indices)
        return [values, indices, g + i, g + values] if backward else [values, indices]

    def reference(ref_data):
        upstream = ref_data.getOutputTensorGrad(0) if backward else None
        return _sort_reference(data, axis, descending, stable, upstream)

    op_tester.run(init_builder, reference, "train" if backward else "infer")


@pytest.mark.follows("test_sort_basic")
@pytest.mark.parametrize("shape", [(17, 4), (18, 10, 5)])
@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("backward", [True, False])
def test_sort_basic(op_tester, shape, descending, backward):
    data = np.random.RandomState(42).randn(*shape).astype(np.float32)
    for axis in range(data.ndim):
        _sort(op_tester, data, axis, descending, backward=backward)


@pytest.mark.follows("test_sort_stable")
@pytest.mark.parametrize("descending", [True, False])
def test_sort_stable(op_tester, descending):
    data = np.array([[2.0, 2.0, 1.0, 10.0, 11.0], [2.0, 15.0, 15.0, 10.0, 11.0]], np.float32)
    for axis in range(data.ndim):
        _sort(op_tester, data, axis, descending, stable=True)
