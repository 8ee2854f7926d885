"""graphcore/popart tests/integration/operators_test/scatterreduce_test_1.py: ScatterReduce's
output and gradients on every axis (negative ones too), with a vector or full index, with or
without initial values, grouped or not (IpuModel2). Smaller tensors than the original's and
one of two of its eight (broadcast, initial values, grouped) combinations per axis."""

import numpy as np
import pytest
from popart_scatterreduce_checks import REDUCTIONS, build, reference

DEVICE = "IpuModel2"


@pytest.mark.follows("test_scatterreduce_axis")
# Each axis with one of two (broadcast, initial values, grouped) combinations, alternating.
@pytest.mark.parametrize(
    "axis,broadcast,init_values,grouped",
    [(a, *[(True, True, False), (False, False, True)][a % 2]) for a in range(-3, 3)],
)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatterreduce_axis(op_tester, axis, broadcast, init_values, grouped, reduction):
    rng = np.random.default_rng(0)
    src = np.ascontiguousarray(np.swapaxes(rng.random((6, 3, 4), np.float32), 0, axis))
    index = np.array([0, 1, 0, 1, 2, 1])
    shape = [1, 1, 1]
    shape[axis] = -1
    expanded = np.ascontiguousarray(np.broadcast_to(index.reshape(shape), src.shape))
    initial = None
    if init_values:
        initial = np.ascontiguousarray(np.swapaxes(rng.random((3, 3, 4), np.float32), 0, axis))
    groups = 2 if grouped else 1

    def init_builder(builder):
        i = expanded if broadcast else index
        stack = (lambda a: None if a is None else np.stack([a] * 2)) if grouped else (lambda a: a)
        return build(
            builder, stack(src), stack(i), axis, 3, reduction, stack(initial), groups, backward=True
        )

    def ref(ref_data):
        d_out = ref_data.getOutputTensorGrad(0)
        initials = None if initial is None else [initial] * groups
        return reference([src] * groups, [expanded] * groups, axis, 3, reduction, initials, d_out)

    op_tester.run(init_builder, ref, "train")
