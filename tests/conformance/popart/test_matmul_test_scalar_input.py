"""graphcore/popart tests/integration/operators_test/matmul_test_scalar_input.py: MatMul
refuses a scalar lhs with the IR's message (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_matmul_scalar_input")
def test_matmul_scalar_input(op_tester):
    d1 = np.array(2, dtype=np.float32)
    d2 = np.random.rand(3, 4).astype(np.float32)

    def init_builder(builder):
        o = builder.aiOnnx.matmul([builder.addInputTensor(d1), builder.addInputTensor(d2)])
        builder.addOutputTensor(o)
        return [o]

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [d1 * d2])
    assert e_info.value.args[0] == (
        "Op(ai.onnx.MatMul:9, inputs=[input, input/1], outputs=[MatMul:0]) doesn't support "
        "scalar tensor input as the lhs input"
    )
