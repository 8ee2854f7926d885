"""graphcore/popart tests/integration/operators_test/nearbyint_test.py: ai.graphcore
NearbyInt rounds half to even, like numpy's round (Cpu)."""

import numpy as np
import pytest

DATA = [
    [[3.10, 6.423, 9.123], [3.5, 6.0, 10.11], [-1.51, 0.49, 1.51], [8.50, 9.51, 140]],
    [[1, 2.5, 3.43, 4.5, 5, 6.5, 7.4324, 8.654, 9.532]],
    [1.24, 2.423, 3.243, 4.50, 5.50, 6.50, 7.90, 8.40, 9.59],
]


@pytest.mark.follows("test_nearbyint")
@pytest.mark.parametrize("data", DATA)
def test_nearbyint(op_tester, data):
    x = np.array(data, np.float32)

    def init_builder(builder):
        out = builder.aiGraphcore.nearbyint([builder.addInputTensor(x)])
        builder.addOutputTensor(out)
        return [out]

    op_tester.run(init_builder, lambda _: [np.round(x)])
