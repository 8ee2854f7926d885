"""graphcore/popart tests/integration/operators_test/scatterreduce_bcast_disabled_test.py:
ScatterReduce with enable_index_broadcast=0 and indices smaller than the source, which (as
torch.scatter_reduce) scatter only the source positions they cover, into axis_size slots or
into larger initial values (IpuModel2). Fewer index and input sizes than the original's."""

import numpy as np
import pytest
from popart_scatterreduce_checks import build, reference

DEVICE = "IpuModel2"


def scatterreduce_bcast_disabled(
    op_tester,
    index_axis_dim,
    index_other_dim,
    input_axis_dim,
    input_other_dim,
    group_size,
    axis,
    include_self,
    reduction,
):
    rng = np.random.default_rng(42)
    src_shape, input_shape = [16, 7], [input_other_dim, 7]
    index_shape = [index_other_dim, index_other_dim + 1]
    src_shape.insert(axis, 8)
    input_shape.insert(axis, input_axis_dim)
    index_shape.insert(axis, index_axis_dim)
    srcs = [rng.standard_normal(src_shape).astype(np.float32) for _ in range(group_size)]
    indices = [rng.integers(0, 8, index_shape) for _ in range(group_size)]
    initials = [np.zeros(input_shape, np.float32) for _ in range(group_size)]
    if not include_self:
        initials = None

    def init_builder(builder):
        stack = (lambda a: np.stack(a)) if group_size > 1 else (lambda a: a[0])
        initial = None if initials is None else stack(initials)
        return build(
            builder,
            stack(srcs),
            stack(indices),
            axis,
            8,
            reduction,
            initial,
            group_size,
            broadcast=False,
        )

    op_tester.run(init_builder, lambda _: reference(srcs, indices, axis, 8, reduction, initials))


INDEX_DIMS = [(4, 1), (8, 5)]


@pytest.mark.follows("test_scatterreduce_bcast_disabled_sum")
@pytest.mark.parametrize("index_axis_dim,index_other_dim", INDEX_DIMS)
@pytest.mark.parametrize("group_size", [1, 2])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatterreduce_bcast_disabled_sum(
    op_tester, index_axis_dim, index_other_dim, group_size, axis, include_self
):
    scatterreduce_bcast_disabled(
        op_tester, index_axis_dim, index_other_dim, 10, 17, group_size, axis, include_self, "sum"
    )


@pytest.mark.follows("test_scatterreduce_bcast_disabled")
@pytest.mark.parametrize("index_axis_dim,index_other_dim", INDEX_DIMS)
@pytest.mark.parametrize("group_size", [1, 2])
@pytest.mark.parametrize("axis", [0, 2])
@pytest.mark.parametrize("reduction", ["mul", "min"])
def test_scatterreduce_bcast_disabled(
    op_tester, index_axis_dim, index_other_dim, group_size, axis, reduction
):
    scatterreduce_bcast_disabled(
        op_tester, index_axis_dim, index_other_dim, 10, 17, group_size, axis, True, reduction
    )
