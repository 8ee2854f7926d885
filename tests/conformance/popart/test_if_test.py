"""graphcore/popart tests/integration/operators_test/if_test.py: If with then/else subgraphs
reading main-graph tensors, including a constant used implicitly by TopK (Cpu)."""

import numpy as np
import pytest


@pytest.mark.follows("test_if_basic")
@pytest.mark.parametrize("condition", [True, False])
def test_if_basic(op_tester, condition):
    i1 = np.array([4], np.float32)

    def init_builder(builder):
        builder.setGraphName("main_graph")
        inp = builder.addInputTensor(i1)
        cond = builder.aiOnnx.constant(np.array(condition).astype(bool), "cond")
        o1 = builder.aiOnnx.constant(np.array([1], np.float32), "o1")

        then_builder = builder.createSubgraphBuilder()
        then_builder.setGraphName("body_then")
        then_builder.addOutputTensor(then_builder.aiOnnx.add([o1, inp]))

        else_builder = builder.createSubgraphBuilder()
        else_builder.setGraphName("body_else")
        o2 = else_builder.aiOnnx.constant(np.array([2], np.float32), "o2")
        else_builder.addOutputTensor(else_builder.aiOnnx.add([inp, o2]))

        o = builder.aiOnnx.logical_if([cond], 1, else_builder, then_builder)[0]
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [i1 + (1.0 if condition else 2.0)])


@pytest.mark.follows("test_if_const_implicit_tensor")
@pytest.mark.parametrize("condition", [True, False])
def test_if_const_implicit_tensor(op_tester, condition):
    i1 = np.array([4], np.int32)

    def init_builder(builder):
        builder.setGraphName("main_graph")
        inp = builder.addInputTensor(i1)
        cond = builder.aiOnnx.constant(np.array(condition).astype(bool), "cond")
        k_in = builder.aiOnnx.constant(np.array([1], np.int64), "k")

        then_builder = builder.createSubgraphBuilder()
        then_builder.setGraphName("body_then")
        top = then_builder.aiOnnx.topk([inp, k_in], axis=0)[0]
        then_builder.addOutputTensor(then_builder.aiOnnx.add([top, inp]))

        else_builder = builder.createSubgraphBuilder()
        else_builder.setGraphName("body_else")
        else_builder.addOutputTensor(else_builder.aiOnnx.topk([inp, k_in], axis=0)[0])

        o = builder.aiOnnx.logical_if([cond], 1, else_builder, then_builder)[0]
        builder.addOutputTensor(o)
        return [o]

    # The largest element, plus the input in the then-branch.
    op_tester.run(init_builder, lambda _: [(i1.max() + i1 * condition).astype(np.int32)])
