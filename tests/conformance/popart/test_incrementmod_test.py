"""graphcore/popart tests/integration/operators_test/incrementmod_test.py: ai.graphcore
IncrementMod is fmod(x + increment, modulus) for float and integer types, in place or not
(Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_incrementmod")
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.uint32, np.int32])
@pytest.mark.parametrize("inplace", [False, True])
def test_incrementmod(op_tester, dtype, inplace):
    increment, modulus = 3.0, 4.0
    # -5 wraps round for uint32, as the original's numpy converted it.
    d1 = np.array([5, -5, 10, 1, 2]).astype(dtype)

    def init_builder(builder):
        o = builder.aiGraphcore.incrementmod([builder.addInputTensor(d1)], increment, modulus)
        builder.addOutputTensor(o)
        return [o]

    def reference(_):
        return [np.fmod(d1 + np.asarray(increment, dtype), np.asarray(modulus, dtype))]

    if inplace:
        op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "infer")
