"""graphcore/popart tests/integration/operators_test/scatterreduce_bcast_test_1.py: ScatterReduce
with a broadcast vector index on each axis, grouped or not, into 8 slots or into initial values
larger than the source (IpuModel2). The original runs each case against torch_scatter and
torch.scatter_reduce; here one numpy reference stands for both, on its largest and smallest
initial values only."""

import pytest
from popart_scatterreduce_bcast_checks import scatterreduce_bcast_enabled

DEVICE = "IpuModel2"


@pytest.mark.follows("test_scatterreduce_bcast_enabled")
# Without initial values their shape does not matter: one case (the original skips the rest).
@pytest.mark.parametrize(
    "include_self,input_axis_dim,input_other_dim", [(True, 8, 16), (True, 10, 17), (False, 8, 16)]
)
@pytest.mark.parametrize("group_size", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("reduction", ["mul", "min"])
def test_scatterreduce_bcast_enabled(
    op_tester, input_axis_dim, input_other_dim, group_size, axis, include_self, reduction
):
    scatterreduce_bcast_enabled(
        op_tester, input_axis_dim, input_other_dim, group_size, axis, include_self, reduction
    )
