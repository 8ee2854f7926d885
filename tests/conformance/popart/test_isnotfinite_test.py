"""graphcore/popart tests/integration/operators_test/isnotfinite_test.py: IsNaN and IsInf
(Cpu)."""

import numpy as np
import pytest

D1 = np.array([np.inf, -np.inf, 3.14159, np.nan], np.float32)


def _run(op_tester, op_name, reference):
    def init_builder(builder):
        o = getattr(builder.aiOnnx, op_name)([builder.addInputTensor(D1)])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [reference(D1)], "infer")


@pytest.mark.follows("test_isnan")
def test_isnan(op_tester):
    _run(op_tester, "isnan", np.isnan)


@pytest.mark.follows("test_isinf")
def test_isinf(op_tester):
    _run(op_tester, "isinf", np.isinf)
