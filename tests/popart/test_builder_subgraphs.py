"""Subgraph builders: ONNX Loop, If and Scan, and ai.graphcore Call."""

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx.reference import ReferenceEvaluator
from reference_models import for_reference

import popart


def _checked_model(builder):
    model = onnx.load_from_string(builder.getModelProto())
    onnx.checker.check_model(model, full_check=True)
    return for_reference(model)


def _run_both(builder, feeds, reference=True):
    """Run with onnxruntime and (unless it lacks the feature) onnx.reference; both must agree."""
    model = _checked_model(builder)
    runtime = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, feeds)
    if reference:
        for a, b in zip(ReferenceEvaluator(model).run(None, feeds), runtime, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    return runtime


def _if_model(opsets):
    builder = popart.Builder(opsets=opsets)
    x = builder.addInputTensor("FLOAT", [3], "x")
    condition = builder.addInputTensor("BOOL", [], "condition")
    then_branch = builder.createSubgraphBuilder()
    then_branch.addInputTensorFromParentGraph(x)
    then_branch.addOutputTensor(then_branch.aiOnnx.relu([x]))
    else_branch = builder.createSubgraphBuilder()
    else_branch.addInputTensorFromParentGraph(x)
    else_branch.addOutputTensor(else_branch.aiOnnx.neg([x]))
    (out,) = builder.aiOnnx.logical_if([condition], 1, else_branch, then_branch)
    builder.addOutputTensor(out)
    return builder, x, condition, out


@pytest.mark.parametrize("version", [9, 10, 11])
def test_if_runs_the_branch_the_condition_picks(version):
    builder, x, condition, out = _if_model({"ai.onnx": version})
    assert out == "If:0"
    assert builder.getTensorShape(out) == [3]
    value = np.array([1.0, -2.0, 3.0], np.float32)
    (taken,) = _run_both(builder, {x: value, condition: np.array(True)})
    np.testing.assert_array_equal(taken, np.maximum(value, 0))
    (other,) = _run_both(builder, {x: value, condition: np.array(False)})
    np.testing.assert_array_equal(other, -value)


def test_branch_may_return_an_enclosing_tensor_unchanged():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2], "x")
    condition = builder.addInputTensor("BOOL", [], "condition")
    then_branch = builder.createSubgraphBuilder()
    then_branch.addInputTensorFromParentGraph(x)
    then_branch.addOutputTensor(x)  # ONNX needs a node here: the builder adds an Identity
    assert then_branch.getOutputTensorIds() == ["Identity:0"]
    else_branch = builder.createSubgraphBuilder()
    else_branch.addOutputTensor(else_branch.aiOnnx.neg([x]))
    (out,) = builder.aiOnnx.logical_if([condition], 1, else_branch, then_branch)
    builder.addOutputTensor(out)
    assert builder.getTensorShape(out) == [2]
    value = np.array([1.0, -2.0], np.float32)
    (result,) = _run_both(builder, {x: value, condition: np.array(True)})
    np.testing.assert_array_equal(result, value)


def test_loop_accumulates_and_outputs_are_typed():
    builder = popart.Builder(opsets={"ai.onnx": 11})
    x = builder.addInputTensor("FLOAT", [3], "x")
    body = builder.createSubgraphBuilder()
    body.addInputTensor("INT64", [], "iteration")
    keep_going = body.addInputTensor("BOOL", [], "keep_going")
    total = body.addInputTensor("FLOAT", [3], "total")
    body.addInputTensorFromParentGraph(x)
    body.addOutputTensor(body.aiOnnx.identity([keep_going]))
    new_total = body.aiOnnx.add([total, x])
    body.addOutputTensor(new_total)
    body.addOutputTensor(body.aiOnnx.mul([new_total, new_total]))  # a scan output
    trips = builder.aiOnnx.constant(np.array(4, np.int64))
    true = builder.aiOnnx.constant(np.array(True))
    zeros = builder.aiOnnx.constant(np.zeros(3, np.float32))
    final, history = builder.aiOnnx.loop([trips, true, zeros], 2, body)
    builder.addOutputTensor(final)
    builder.addOutputTensor(history)
    assert (final, history) == ("Loop:0", "Loop:1")
    assert builder.getTensorShape(final) == [3]
    # A constant trip count sizes the scan output, as LoopOp::setup does (willow/src/op/loop.cpp).
    assert builder.getTensorShape(history) == [4, 3]
    value = np.array([1.0, 2.0, -1.0], np.float32)
    result, squares = _run_both(builder, {x: value})
    np.testing.assert_allclose(result, 4 * value)
    np.testing.assert_allclose(squares, [(k * value) ** 2 for k in range(1, 5)])


def _running_sum_body(builder):
    body = builder.createSubgraphBuilder()
    state = body.addInputTensor("FLOAT", [2], "state")
    element = body.addInputTensor("FLOAT", [2], "element")
    new_state = body.aiOnnx.add([state, element])
    body.addOutputTensor(new_state)
    body.addOutputTensor(body.aiOnnx.identity([new_state]))
    return body


@pytest.mark.parametrize("direction", [0, 1])
def test_scan_9_running_sum_in_both_directions(direction):
    builder = popart.Builder(opsets={"ai.onnx": 9})
    initial = builder.addInputTensor("FLOAT", [2], "initial")
    sequence = builder.addInputTensor("FLOAT", [4, 2], "sequence")
    final, partial = builder.aiOnnx.scan(
        [initial, sequence], 2, _running_sum_body(builder), 1, scan_input_directions=[direction]
    )
    builder.addOutputTensor(final)
    builder.addOutputTensor(partial)
    values = np.arange(8, dtype=np.float32).reshape(4, 2)
    feeds = {initial: np.zeros(2, np.float32), sequence: values}
    # onnx.reference does not implement reversed scan inputs.
    result, sums = _run_both(builder, feeds, reference=direction == 0)
    np.testing.assert_allclose(result, values.sum(0))
    ordered = values if direction == 0 else values[::-1]
    np.testing.assert_allclose(sums, np.cumsum(ordered, axis=0))


def test_scan_8_has_a_batch_and_sequence_lengths():
    builder = popart.Builder(opsets={"ai.onnx": 8})
    initial = builder.addInputTensor("FLOAT", [1, 2], "initial")
    sequence = builder.addInputTensor("FLOAT", [1, 4, 2], "sequence")
    outputs = builder.aiOnnx.scan(["", initial, sequence], 2, _running_sum_body(builder), 1)
    node = _checked_model(builder).graph.node[0]
    assert node.op_type == "Scan" and list(node.input) == ["", initial, sequence]
    assert outputs == ["Scan:0", "Scan:1"]


def test_call_embeds_the_callee_and_types_its_outputs():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 3], "x")
    callee = builder.createSubgraphBuilder()
    callee.setGraphName("square")
    argument = callee.addInputTensor("FLOAT", [2, 3], "argument")
    callee.addOutputTensor(callee.aiOnnx.mul([argument, argument]))
    callee.addOutputTensor(callee.aiOnnx.reducesum([argument], axes=[1], keepdims=0))
    squared, summed = builder.aiGraphcore.call([x], 2, callee)
    doubled = builder.aiOnnx.add([squared, squared])
    builder.addOutputTensor(doubled)
    builder.addOutputTensor(summed)
    assert builder.getTensorShape(doubled) == [2, 3]
    assert builder.getTensorShape(summed) == [2]
    model = _checked_model(builder)
    node = model.graph.node[0]
    assert (node.op_type, node.domain) == ("Call", "ai.graphcore")
    assert node.attribute[0].name == "callee" and node.attribute[0].g.name == "square"
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 10), ("ai.graphcore", 1)}


def test_ids_are_unique_across_the_model_and_its_subgraphs():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    child = builder.createSubgraphBuilder()
    grandchild = child.createSubgraphBuilder()
    ids = [builder.aiOnnx.relu([x]), child.aiOnnx.relu([x]), grandchild.aiOnnx.relu([x])]
    assert ids == ["Relu:0", "Relu:0/1", "Relu:0/2"]
    assert child.addInputTensor("FLOAT", [1]) == "input/1"
    with builder.nameScope("block"):
        scoped_child = builder.createSubgraphBuilder()
    assert scoped_child.aiOnnx.relu([x]) == "block/Relu:0"
    names = {builder._impl._graph.name, child._impl._graph.name, grandchild._impl._graph.name}
    assert len(names) == 3


def test_subgraph_uses_parent_tensors_but_not_unknown_ones():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    child = builder.createSubgraphBuilder()
    child.aiOnnx.relu([x])  # outer-scope tensors are visible, as in ONNX
    with pytest.raises(popart.popart_exception, match="unknown tensor id 'nope'"):
        child.addInputTensorFromParentGraph("nope")
    with pytest.raises(popart.popart_exception, match="not in this subgraph or its parents"):
        child.aiOnnx.relu(["nope"])
    inner = child.aiOnnx.relu([x])
    with pytest.raises(popart.popart_exception, match=f"unknown tensor id '{inner}'"):
        builder.aiOnnx.relu([inner])  # a subgraph's tensors do not leak out


def test_subgraph_errors():
    builder = popart.Builder(opsets={"ai.onnx": 11})
    x = builder.addInputTensor("FLOAT", [2])
    condition = builder.addInputTensor("BOOL", [])
    one_output = builder.createSubgraphBuilder()
    one_output.addOutputTensor(one_output.aiOnnx.relu([x]))
    two_outputs = builder.createSubgraphBuilder()
    two_outputs.addOutputTensor(two_outputs.aiOnnx.relu([x]))
    two_outputs.addOutputTensor(two_outputs.aiOnnx.neg([x]))
    with pytest.raises(popart.popart_exception, match="num_outputs is 1 but subgraph"):
        builder.aiOnnx.logical_if([condition], 1, one_output, two_outputs)
    with pytest.raises(popart.popart_exception, match="If: args must be"):
        builder.aiOnnx.logical_if([condition, x], 1, one_output, one_output)
    with pytest.raises(popart.popart_exception, match="must match the body's inputs"):
        builder.aiOnnx.loop([x], 1, one_output)
    with pytest.raises(popart.popart_exception, match="createSubgraphBuilder"):
        builder.aiOnnx.logical_if([condition], 1, builder, builder)
    other_model = popart.Builder().createSubgraphBuilder()
    with pytest.raises(popart.popart_exception, match="createSubgraphBuilder"):
        builder.aiGraphcore.call([], 0, other_model)
    with pytest.raises(popart.popart_exception, match=r"number of inputs \(1\) does not match"):
        builder.aiGraphcore.call([x], 1, one_output)
    with pytest.raises(popart.popart_exception, match="a subgraph builder is required"):
        builder.aiOnnx.scan([x], 1, None, 1)
