"""graphcore/popart tests/integration/operators_test/dynamiczero_test.py: ai.graphcore
DynamicZero of blocks at run-time offsets (twice, with an Add between), its inferred
shape, and the gradients that the zeroed blocks stop, against numpy (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_dynamiczero_training")
def test_dynamiczero_training(op_tester):
    data = np.random.rand(2, 12, 3, 3).astype(np.float32)
    inject = np.random.rand(2, 12, 3, 3).astype(np.float32)
    axes, sizes = [1, 2], [4, 1]
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        tensor = builder.addInitializedInputTensor(data)
        inject_tensor = builder.addInitializedInputTensor(inject)
        out = tensor
        for i, (x, y) in enumerate([(1, 2), (2, 0)]):
            index = builder.addInputTensor(np.asarray([x * sizes[0], y * sizes[1]], np.uint32))
            out = builder.aiGraphcore.dynamiczero([out, index], axes=axes, sizes=sizes)
            assert builder.getTensorShape(out) == list(data.shape)
            if i == 0:
                out = builder.aiOnnx.add([out, inject_tensor])
        total = builder.aiOnnx.reducesum([out], axes=[0, 1, 2, 3], keepdims=False)
        total = builder.aiOnnx.unsqueeze([total], axes=[0])
        builder.addOutputTensor(total)
        return [total, g + total, g + tensor, g + inject_tensor, out]

    def reference(ref_data):
        mask0 = np.ones(data.shape, np.float32)
        mask0[:, 4:8, 2:3, :] = 0.0
        mask1 = np.ones(data.shape, np.float32)
        mask1[:, 8:12, 0:1, :] = 0.0
        out = (data * mask0 + inject) * mask1
        d__o = ref_data.getOutputTensorGrad(0)
        total = np.array([out.sum()], np.float32)
        return [total, d__o, d__o[0] * mask0 * mask1, d__o[0] * mask1, out]

    op_tester.setPatterns(popart.PatternsLevel.All, enableRuntimeAsserts=False)
    op_tester.rtol = 1e-5
    op_tester.atol = 1e-5
    op_tester.run(init_builder, reference, "train")
