"""Every model the Builder writes is valid ONNX (full check) and runs in a session.

Outputs ONNX shape inference cannot type on its own (ai.graphcore grouped ops, Loop and
Call bodies built from untyped inputs, BatchNormalization's training outputs, a
reduce-scatter) are typed as PopART's IR types them, so the session loads them.
"""

import numpy as np
import onnx
import onnxruntime
from inference_helpers import run_inference

import popart


def _valid_model(builder) -> onnx.ModelProto:
    model = onnx.load_from_string(builder.getModelProto())
    onnx.checker.check_model(model, full_check=True)
    return model


def _output_shape(model, name):
    (output,) = [value for value in model.graph.output if value.name == name]
    return [
        dim.dim_value if dim.HasField("dim_value") else None
        for dim in output.type.tensor_type.shape.dim
    ]


def test_grouped_gather_output_is_typed_and_gathers_per_group():
    builder = popart.Builder()
    data = builder.addInputTensor("FLOAT", [2, 5, 3], "data")
    indices = builder.addInputTensor("INT32", [2, 4], "indices")
    out = builder.aiGraphcore.groupedgather([data, indices], axis=1)
    builder.addOutputTensor(out)
    assert _output_shape(_valid_model(builder), out) == [2, 4, 3]
    data_value = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    index_value = np.array([[0, 4, 4, 1], [3, 2, 0, 0]], np.int32)
    (result,) = run_inference(
        builder.getModelProto(), {data: data_value, indices: index_value}, [out]
    )
    expected = np.stack([data_value[group][index_value[group]] for group in range(2)])
    np.testing.assert_array_equal(result, expected)


def test_batch_normalization_training_outputs_are_typed_per_channel():
    builder = popart.Builder(opsets={"ai.onnx": 10, "ai.graphcore": 1})
    x = builder.addInputTensor("FLOAT", [2, 3, 4, 4], "x")
    params = [
        builder.addInitializedInputTensor(np.full(3, value, np.float32))
        for value in (1.0, 0.0, 0.0, 1.0)
    ]
    outputs = builder.aiOnnx.batchnormalization([x, *params], 5)
    for output in outputs:
        builder.addOutputTensor(output)
    model = _valid_model(builder)
    assert [_output_shape(model, name) for name in outputs] == [[2, 3, 4, 4]] + [[3]] * 4
    value = np.random.default_rng(0).normal(size=(2, 3, 4, 4)).astype(np.float32)
    results = run_inference(builder.getModelProto(), {x: value}, outputs)
    assert [result.shape for result in results] == [(2, 3, 4, 4)] + [(3,)] * 4


def _loop_adding_three_times(builder, value):
    """A Loop whose body, built from untyped inputs, adds `value` to the carried value (which
    starts as `value`) three times: its output is 4 * value."""
    trip_count = builder.aiOnnx.constant(np.array(3, np.int64))
    keep_going = builder.aiOnnx.constant(np.array(True))
    body = builder.createSubgraphBuilder()
    body.addUntypedInputTensor("iteration")
    condition = body.addUntypedInputTensor("condition")
    carried = body.addUntypedInputTensor("carried")
    body.addInputTensorFromParentGraph(value)
    body.addOutputTensor(body.aiOnnx.identity([condition]))
    body.addOutputTensor(body.aiOnnx.add([carried, value]))
    (out,) = builder.aiOnnx.loop([trip_count, keep_going, value], 1, body)
    return out


def test_loop_built_from_untyped_body_inputs_has_typed_outputs():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2], "x")
    out = _loop_adding_three_times(builder, x)
    builder.addOutputTensor(out)
    assert _output_shape(_valid_model(builder), out) == [2]
    value = np.array([1.0, -2.0], np.float32)
    (result,) = run_inference(builder.getModelProto(), {x: value}, [out])
    np.testing.assert_allclose(result, 4 * value)


def test_call_of_untyped_subgraph_is_typed_from_the_call_site():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 3], "x")
    callee = builder.createSubgraphBuilder()
    argument = callee.addUntypedInputTensor("argument")
    callee.addOutputTensor(callee.aiOnnx.relu([argument]))
    (out,) = builder.aiGraphcore.call([x], 1, callee)
    builder.addOutputTensor(out)
    assert _output_shape(_valid_model(builder), out) == [2, 3]
    value = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    (result,) = run_inference(builder.getModelProto(), {x: value}, [out])
    np.testing.assert_array_equal(result, np.maximum(value, 0))


def test_reduce_scatter_output_is_flat_with_a_size_set_by_the_replicas():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 3], "x")
    out = builder.aiGraphcore.replicatedreducescatter([x])
    builder.addOutputTensor(out)
    assert _output_shape(_valid_model(builder), out) == [None]
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    (result,) = run_inference(builder.getModelProto(), {x: value}, [out])
    np.testing.assert_array_equal(result, value.reshape(-1))


def test_shape_of_a_grouped_gather_is_typed():
    builder = popart.Builder()
    data = builder.addInputTensor("FLOAT", [2, 5, 3], "data")
    indices = builder.addInputTensor("INT32", [2, 4], "indices")
    out = builder.aiOnnx.shape([builder.aiGraphcore.groupedgather([data, indices], axis=1)])
    builder.addOutputTensor(out)
    assert _output_shape(_valid_model(builder), out) == [3]
    zeros = np.zeros((2, 4), np.int32)
    (result,) = run_inference(
        builder.getModelProto(), {data: np.zeros((2, 5, 3), np.float32), indices: zeros}, [out]
    )
    np.testing.assert_array_equal(result, [2, 4, 3])


def test_recurrent_outputs_are_all_typed():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [5, 2, 3], "x")
    rng = np.random.default_rng(1)
    gru_weights = [
        builder.addInitializedInputTensor(rng.normal(size=shape).astype(np.float32))
        for shape in ((1, 12, 3), (1, 12, 4))
    ]
    lstm_weights = [
        builder.addInitializedInputTensor(rng.normal(size=shape).astype(np.float32))
        for shape in ((1, 16, 3), (1, 16, 4))
    ]
    outputs = builder.aiOnnx.gru([x, *gru_weights], 2) + builder.aiOnnx.lstm([x, *lstm_weights], 3)
    for output in outputs:
        builder.addOutputTensor(output)
    model = _valid_model(builder)
    shapes = [_output_shape(model, name) for name in outputs]
    assert shapes == [[5, 1, 2, 4], [1, 2, 4], [5, 1, 2, 4], [1, 2, 4], [1, 2, 4]]
    value = rng.normal(size=(5, 2, 3)).astype(np.float32)
    results = run_inference(builder.getModelProto(), {x: value}, outputs)
    # onnxruntime needs the hidden_size the Builder leaves out (as PopART's does).
    for node in model.graph.node:
        node.attribute.append(onnx.helper.make_attribute("hidden_size", 4))
    reference = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(outputs, {x: value})
    for result, expected in zip(results, reference, strict=True):
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-5)


def _value_info(model, name):
    (value,) = [v for v in model.graph.value_info if v.name == name]
    tensor_type = value.type.tensor_type
    dims = [dim.dim_value for dim in tensor_type.shape.dim]
    return onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type), dims


def test_intermediate_tensors_are_typed_in_value_info():
    """Inside the graph (not outputs), the tensors inference cannot type carry value_info."""
    builder = popart.Builder()
    data = builder.addInputTensor("FLOAT", [2, 5, 3], "data")
    indices = builder.addInputTensor("INT32", [2, 4], "indices")
    gathered = builder.aiGraphcore.groupedgather([data, indices], axis=1)
    shape = builder.aiOnnx.shape([gathered])
    looped = _loop_adding_three_times(builder, gathered)
    total = builder.aiOnnx.add(
        [builder.aiOnnx.relu([looped]), builder.aiOnnx.cast([shape], "FLOAT")]
    )
    builder.addOutputTensor(total)
    model = _valid_model(builder)
    assert _value_info(model, gathered) == (np.float32, [2, 4, 3])
    assert _value_info(model, shape) == (np.int64, [3])
    assert _value_info(model, looped) == (np.float32, [2, 4, 3])
    data_value = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    index_value = np.array([[0, 4, 4, 1], [3, 2, 0, 0]], np.int32)
    (result,) = run_inference(
        builder.getModelProto(), {data: data_value, indices: index_value}, [total]
    )
    expected_gather = np.take_along_axis(data_value, index_value[:, :, None].repeat(3, 2), axis=1)
    np.testing.assert_allclose(result, 4 * expected_gather + np.array([2.0, 4.0, 3.0]))
