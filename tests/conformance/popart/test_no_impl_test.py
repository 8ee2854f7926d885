"""graphcore/popart tests/integration/constexpr_tests/no_impl_test.py: at TRACE level the
ConstExpr pass logs a warning for a constant-fed op it cannot fold (Relu) (Cpu)."""

import logging

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_for_warning")
def test_for_warning(op_tester, capfd):
    data = np.zeros(2, dtype=np.float32)

    def init_builder(builder):
        x = builder.aiOnnx.relu([builder.aiOnnx.constant(data)])
        x = builder.aiOnnx.identity([x])
        builder.addOutputTensor(x)
        return [x]

    level = logging.getLogger("popart").level
    popart.getLogger().setLevel("TRACE")
    try:
        op_tester.run(init_builder, lambda _: [data])
    finally:
        logging.getLogger("popart").setLevel(level)
    warns = [
        line
        for line in capfd.readouterr().err.splitlines()
        if "No ConstExpr implementation of " in line
    ]
    assert len(warns) > 1
    assert "Relu" in warns[0]
