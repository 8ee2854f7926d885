"""graphcore/popart tests/integration/constexpr_tests/test_squeeze_ce.py: a Squeeze of a
Constant is folded away by the ConstExpr pass, leaving two ops in the IR (Cpu)."""

import json

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_basic_squeeze")
def test_basic_squeeze(op_tester):
    rng = np.random.default_rng(1)
    input_data = rng.random((4, 3)).astype(np.float32)
    const_data = rng.random((1, 4, 1, 3, 1)).astype(np.float32)

    def init_builder(builder):
        d0 = builder.addInputTensor(input_data, "data0")
        squeezed = builder.aiOnnx.squeeze([builder.aiOnnx.constant(const_data)], axes=[0, 2, 4])
        squeezed = builder.aiOnnx.identity([squeezed])  # lets the Squeeze fold
        out = builder.aiOnnx.add([d0, squeezed])
        builder.addOutputTensor(out)
        return [out, squeezed]

    expected = const_data.reshape(4, 3)
    session = op_tester.run(init_builder, lambda _: [input_data + expected, expected])
    ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    ops = ir["maingraph"]
    assert len(ops) == 2
    assert "Squeeze" not in [op["type"] for op in ops]
