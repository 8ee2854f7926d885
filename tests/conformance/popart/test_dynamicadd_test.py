"""graphcore/popart tests/integration/operators_test/dynamicadd_test.py: ai.graphcore
DynamicAdd of three scaled slices into a weight at run-time offsets, its inferred shape,
and the gradients of the weight and the added slices, against numpy (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_dynamicadd_training")
def test_dynamicadd_training(op_tester):
    data = np.random.rand(4, 3, 5).astype(np.float32)
    adds = [np.random.rand(2, 3, 1).astype(np.float32) for _ in range(3)]
    offsets = [(1, 2), (2, 0), (2, 2)]
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        tensor = builder.addInitializedInputTensor(data)
        add_tensors = [builder.addInitializedInputTensor(a) for a in adds]
        out = tensor
        for i, offset in enumerate(offsets):
            index = builder.addInputTensor(np.asarray(offset, np.uint32))
            add = builder.aiGraphcore.scale([add_tensors[i]], float(1 + i))
            out = builder.aiGraphcore.dynamicadd([out, index, add], axes=[0, 2], sizes=[2, 1])
            assert builder.getTensorShape(out) == list(data.shape)
        total = builder.aiOnnx.reducesum([out], axes=[0, 1, 2], keepdims=False)
        total = builder.aiOnnx.unsqueeze([total], axes=[0])
        builder.addOutputTensor(total)
        return [total, g + total, g + tensor, *(g + t for t in add_tensors), out]

    def reference(ref_data):
        out = data.copy()
        for i, (x, y) in enumerate(offsets):
            out[x : x + 2, :, y : y + 1] += adds[i] * (1.0 + i)
        d__o = ref_data.getOutputTensorGrad(0)
        total = np.array([out.sum()], np.float32)
        weight_grad = np.full(data.shape, d__o[0], np.float32)
        add_grads = [np.full(a.shape, d__o[0] * (1.0 + i), np.float32) for i, a in enumerate(adds)]
        return [total, d__o, weight_grad, *add_grads, out]

    op_tester.setPatterns(popart.PatternsLevel.All, enableRuntimeAsserts=False)
    op_tester.rtol = 1e-5
    op_tester.atol = 1e-5
    op_tester.run(init_builder, reference, "train")
