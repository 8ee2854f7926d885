"""graphcore/popart tests/integration/operators_test/matmul_test_mismatched_inputs.py:
MatMul of [3, 4] by [3, 4] fails with the IR's message naming the op and both shapes
(Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_matmul_mismatched_inputs")
def test_matmul_mismatched_inputs(op_tester):
    d1 = np.random.rand(3, 4).astype(np.float32)
    d2 = np.random.rand(3, 4).astype(np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.matmul([builder.addInputTensor(d1), builder.addInputTensor(d2)])
        builder.addOutputTensor(o)
        return [o]

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [np.zeros((3, 3), np.float32)])
    assert e_info.value.args[0] == (
        "Op(ai.onnx.MatMul:9, inputs=[input, input/1], outputs=[MatMul:0]) contracting "
        "dimensions unequal: lhs 'input' [3 4], rhs 'input/1' [3 4]"
    )
