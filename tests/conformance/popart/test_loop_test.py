"""graphcore/popart tests/integration/operators_test/loop_test.py: Loop with a trip count
(adding or matmul-ing a loop-carried value, reading main-graph tensors implicitly), stopped
early by its condition, with scan outputs, and with a constant used inside (Cpu)."""

import numpy as np
import pytest

import popart


def _loop(builder, a, body, trip_count, num_outputs=1, carried_cond=None):
    """Loop(trip_count, True, a) over `body(loop_builder, a_in, keepgoing) -> outputs`."""
    m = builder.aiOnnx.constant(np.array(trip_count, np.int64), "M")
    cond = builder.aiOnnx.constant(np.array(True), "cond")
    loop_builder = builder.createSubgraphBuilder()
    loop_builder.setGraphName("body")
    loop_builder.addInputTensor(popart.TensorInfo("INT64", []))
    if carried_cond is None:
        keepgoing = loop_builder.addInputTensor(popart.TensorInfo("BOOL", []))
    else:
        keepgoing = loop_builder.addUntypedInputTensor(cond)
    a_in = loop_builder.addUntypedInputTensor(a)
    for out in body(loop_builder, a_in, keepgoing):
        loop_builder.addOutputTensor(out)
    return builder.aiOnnx.loop([m, cond, a], num_outputs, loop_builder)


@pytest.mark.follows("test_simple_for_loop")
def test_simple_for_loop(op_tester):
    i1, i2 = np.array([3], np.float32), np.array([6], np.float32)
    for b_first in (False, True):

        def init_builder(builder, b_first=b_first):
            builder.setGraphName("main_graph")
            a, b = builder.addInputTensor(i1), builder.addInputTensor(i2)

            def body(lb, a_in, keepgoing):
                return [keepgoing, lb.aiOnnx.add([b, a_in] if b_first else [a_in, b])]

            o = _loop(builder, a, body, 10)[0]
            builder.addOutputTensor(o)
            return [o]

        op_tester.setPatterns(popart.PatternsLevel.NoPatterns, enableRuntimeAsserts=False)
        op_tester.run(init_builder, lambda _: [i1 + 10 * i2], step_type="infer")


M2 = np.array([[1, 2], [3, 4]], np.float32)


@pytest.mark.follows("test_loop_matmul")
def test_loop_matmul(op_tester):
    def init_builder(builder):
        builder.setGraphName("main_graph")
        a, b = builder.addInputTensor(M2), builder.addInputTensor(M2)

        def body(lb, a_in, keepgoing):
            return [keepgoing, lb.aiOnnx.matmul([lb.aiOnnx.matmul([a_in, b]), b])]

        o = _loop(builder, a, body, 10)[0]
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(popart.PatternsLevel.NoPatterns, enableRuntimeAsserts=False)
    op_tester.rtol = 1e-5
    op_tester.run(init_builder, lambda _: [M2 @ np.linalg.matrix_power(M2, 20)], step_type="infer")


@pytest.mark.follows("test_loop_stop")
def test_loop_stop(op_tester):
    i1, i2 = np.array([1], np.float32), np.array([4], np.float32)

    def init_builder(builder):
        builder.setGraphName("main_graph")
        a, b = builder.addInputTensor(i1), builder.addInputTensor(i2)

        def body(lb, a_in, _):
            a_out = lb.aiOnnx.mul([a_in, b])
            limit = lb.aiOnnx.constant(np.array([128], np.float32), "max")
            return [lb.aiOnnx.less([a_out, limit]), a_out]

        o = _loop(builder, a, body, 10, carried_cond=True)[0]
        builder.addOutputTensor(o)
        return [o]

    # 1 * 4 ** k stops at the first value >= 128.
    op_tester.setPatterns(popart.PatternsLevel.NoPatterns, enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [np.array([256], np.float32)], step_type="infer")


@pytest.mark.follows("test_loop_scanout")
def test_loop_scanout(op_tester):
    i3 = -M2

    def init_builder(builder):
        builder.setGraphName("main_graph")
        a, b, c = (builder.addInputTensor(x) for x in (M2, M2, i3))

        def body(lb, a_in, keepgoing):
            a_out = lb.aiOnnx.matmul([a_in, b])
            return [keepgoing, a_out, a_out, lb.aiOnnx.add([a_out, c])]

        outputs = _loop(builder, a, body, 10, num_outputs=3)
        for o in outputs:
            builder.addOutputTensor(o)
        return list(outputs)

    def reference(_):
        scan = np.stack([np.linalg.matrix_power(M2, k + 2) for k in range(10)])
        return [scan[-1], scan, scan + i3]

    op_tester.rtol = 1e-5
    op_tester.run(init_builder, reference, step_type="infer")


@pytest.mark.follows("test_loop_const_implicit_tensor")
def test_loop_const_implicit_tensor(op_tester):
    i1 = np.array([4], np.float32)

    def init_builder(builder):
        builder.setGraphName("main_graph")
        a = builder.addInputTensor(i1)
        k_in = builder.aiOnnx.constant(np.array([1], np.int64), "k")

        def body(lb, a_in, keepgoing):
            return [keepgoing, lb.aiOnnx.topk([a_in, k_in], axis=0)[0]]

        o = _loop(builder, a, body, 10)[0]
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [np.array([4], np.float32)], step_type="infer")
