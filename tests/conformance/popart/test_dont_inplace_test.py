"""graphcore/popart tests/integration/dont_inplace_test.py: with the InPlace pattern on, an op
in a subgraph whose input is also a subgraph output is not made to modify it, and a Concat of
one tensor twice is not made in place under an Add already in place on that tensor: the
results are those of the ops out of place (Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_dont_inplace_output_consumers")
def test_dont_inplace_output_consumers(op_tester):
    d0 = np.asarray([1.0, 1.0]).astype(np.float32)

    def init_builder(builder):
        i0 = builder.addInputTensor(d0)
        sub = builder.createSubgraphBuilder()
        sub.addInputTensorFromParentGraph(i0)
        scaled = [i0]
        for name in ("hoop1", "hoop2", "hoop3", "hoop4", "hoop5", "hoop5"):
            scaled.append(sub.aiGraphcore.scale([scaled[-1]], 2.0, name))
        sub.addOutputTensor(scaled[3])
        sub.addOutputTensor(scaled[6])
        outs = builder.aiGraphcore.call([i0], 2, sub)
        summation = builder.aiOnnx.add([outs[0], outs[1]])
        builder.addOutputTensor(summation)
        return [summation]

    op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d0 * 8 + d0 * 64], "infer")


@pytest.mark.follows("test_dont_inplace_when_aliased_inputs")
def test_dont_inplace_when_aliased_inputs(op_tester):
    data = np.random.randn(5, 3, 16, 16).astype(np.float32)

    def init_builder(builder):
        x = builder.addInputTensor(data)
        concatenated = builder.aiOnnx.concat([x, x], 0)
        starts = builder.aiOnnx.constant(np.array([4]).astype(np.int32))
        ends = builder.aiOnnx.constant(np.array([9]).astype(np.int32))
        axes = builder.aiOnnx.constant(np.array([0]).astype(np.int32))
        sliced = builder.aiOnnx.slice([concatenated, starts, ends, axes])
        return [builder.aiOnnx.add([x, sliced])]

    def reference(_):
        return [data + np.concatenate([data, data], axis=0)[4:9]]

    op_tester.setPatterns(["InPlace"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "infer")
