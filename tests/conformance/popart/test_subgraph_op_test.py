"""graphcore/popart tests/integration/operators_test/subgraph_op_test.py: nested subgraph ops
(Call of a Loop; Loop of a Loop of an If, and a Call of the same Loop) whose bodies use tensors
of the scopes around them (Cpu)."""

import numpy as np
import pytest

import popart

A = np.array([[1, 2], [3, 4]], np.float32)
B = np.array([[4, 3], [2, 1]], np.float32)
C = np.array([[5, 6], [7, 8]], np.float32)
D = np.array([[8, 7], [6, 5]], np.float32)


def _scalar(builder, value, dtype, name):
    return builder.aiOnnx.constant(np.array(value, dtype), name)


@pytest.mark.follows("test_nested_simple")
def test_nested_simple(op_tester):
    trips = 6

    def init_builder(builder):
        builder.setGraphName("main_graph")
        a = builder.addInputTensor(A)
        b = builder.addInitializedInputTensor(B)
        c = builder.addInitializedInputTensor(C)
        trip_count = _scalar(builder, trips, np.int64, "m0")
        keep_going = _scalar(builder, True, np.bool_, "cond0")

        call = builder.createSubgraphBuilder()
        call.setGraphName("call")
        body = call.createSubgraphBuilder()
        body.setGraphName("loop")
        d = call.aiOnnx.constant(D, "d")  # the call's tensor, used by the loop inside it

        body.addInputTensor(popart.TensorInfo("INT64", []))  # iteration
        cond_in = body.addUntypedInputTensor(keep_going)
        x = body.addUntypedInputTensor(a)
        x = body.aiOnnx.add([body.aiOnnx.add([body.aiOnnx.matmul([x, b]), c]), d])
        body.addOutputTensor(cond_in)
        body.addOutputTensor(x)

        call.addOutputTensor(call.aiOnnx.loop([trip_count, keep_going, a], 1, body)[0])
        first = builder.aiGraphcore.call([], 1, call)[0]
        second = builder.aiGraphcore.call([], 1, call)[0]
        o = builder.aiOnnx.add([first, second])
        builder.addOutputTensor(o)
        return [o]

    def reference(_):
        x = A
        for _ in range(trips):
            x = x @ B + C + D
        return [2 * x]

    op_tester.run(init_builder, reference, step_type="infer")


@pytest.mark.follows("test_nested_complex")
def test_nested_complex(op_tester):
    e_value = np.array([[-1, -1], [-2, -2]], np.float32)
    f_value = np.array([[-1, 1], [-3, 3]], np.float32)
    outer_trips, inner_trips, then_count = 4, 3, 2

    def init_builder(builder):
        builder.setGraphName("main_graph")
        a = builder.addInputTensor(A)
        b = builder.addInitializedInputTensor(B)
        c = builder.addInitializedInputTensor(C)
        d = builder.addInitializedInputTensor(D)
        f = builder.addInputTensor(f_value)
        m0 = _scalar(builder, outer_trips, np.int64, "m0")
        cond0 = _scalar(builder, True, np.bool_, "cond0")
        m1 = _scalar(builder, inner_trips, np.int64, "m1")
        cond1 = _scalar(builder, True, np.bool_, "cond1")
        m2 = _scalar(builder, then_count, np.int64, "m2")

        outer = builder.createSubgraphBuilder()
        outer.setGraphName("l0")
        inner = builder.createSubgraphBuilder()
        inner.setGraphName("l1")
        call = builder.createSubgraphBuilder()
        call.setGraphName("c0")
        then_branch = inner.createSubgraphBuilder()
        then_branch.setGraphName("i0")
        else_branch = inner.createSubgraphBuilder()
        else_branch.setGraphName("e0")

        # The inner loop: x @ y + c for its first `then_count` iterations, x + f after.
        iteration = inner.addInputTensor(popart.TensorInfo("INT64", []))
        cond_in = inner.addUntypedInputTensor(cond1)
        x = inner.addUntypedInputTensor(a)
        y = inner.addUntypedInputTensor(b)
        then_branch.addOutputTensor(then_branch.aiOnnx.add([then_branch.aiOnnx.matmul([x, y]), c]))
        else_branch.addOutputTensor(else_branch.aiOnnx.add([x, f]))
        taken = inner.aiOnnx.less([iteration, m2])
        chosen = inner.aiOnnx.logical_if([taken], 1, else_branch, then_branch)[0]
        inner.addOutputTensor(cond_in)
        inner.addOutputTensor(chosen)
        inner.addOutputTensor(y)

        e = call.aiOnnx.constant(e_value, "e")
        call.addOutputTensor(call.aiOnnx.loop([m1, cond1, a, e], 2, inner)[0])

        outer.addInputTensor(popart.TensorInfo("INT64", []))
        outer_cond = outer.addUntypedInputTensor(cond0)
        outer_x = outer.addUntypedInputTensor(a)
        outer.addOutputTensor(outer_cond)
        outer.addOutputTensor(outer.aiOnnx.loop([m1, cond1, outer_x, d], 2, inner)[0])

        looped = builder.aiOnnx.loop([m0, cond0, a], 1, outer)[0]
        called = builder.aiGraphcore.call([], 1, call)[0]
        o = builder.aiOnnx.add([looped, called])
        builder.addOutputTensor(o)
        return [o]

    def inner_loop(x, y):
        for j in range(inner_trips):
            x = x @ y + C if j < then_count else x + f_value
        return x

    def reference(_):
        x = A
        for _ in range(outer_trips):
            x = inner_loop(x, D)
        return [x + inner_loop(A, e_value)]

    op_tester.run(init_builder, reference, step_type="infer")
