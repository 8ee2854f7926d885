"""graphcore/popart tests/integration/constexpr_tests/test_cast_ce.py: a Cast of a Constant
(folded by the original's ConstExpr pass) between int64, int32, float32 and float16,
multiplied with an input (Cpu)."""

import numpy as np
import pytest

TYPE_NAMES = {np.int64: "INT64", np.int32: "INT32", np.float32: "FLOAT", np.float16: "FLOAT16"}


@pytest.mark.follows("test_various_casts")
@pytest.mark.parametrize(
    "from_type,to_type",
    [
        (f, t)
        for f in (np.int64, np.int32, np.float32, np.float16)
        for t in (np.int32, np.float32, np.float16)
        if f != t
    ],
)
def test_various_casts(op_tester, from_type, to_type):
    rng = np.random.default_rng(1)
    input_data = (rng.random(2) * 100).astype(to_type)
    const_data = (rng.random(2) * 100).astype(from_type)

    def init_builder(builder):
        d0 = builder.addInputTensor(input_data, "data0")
        cast = builder.aiOnnx.cast([builder.aiOnnx.constant(const_data)], TYPE_NAMES[to_type])
        t2 = builder.aiOnnx.identity([cast])
        t3 = builder.aiOnnx.mul([d0, t2])
        builder.addOutputTensor(t3)
        return [t3, t2]

    cast = const_data.astype(to_type)
    op_tester.rtol = 1e-3 if to_type == np.float16 else 1e-5
    op_tester.run(init_builder, lambda _: [input_data * cast, cast])
