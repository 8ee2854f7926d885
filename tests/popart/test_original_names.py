"""Names of the original PopART module that programs use: the supported-operation lists,
GraphTransformer, the Poplar debug-info stream, the pattern registry's names, the opset
objects' str() and the positional arguments of the opset bindings."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import popart


def test_supported_operations_are_identifiers_the_builder_can_run():
    supported = popart.getSupportedOperations(False)
    keys = {(op.domain, op.type, op.version) for op in supported}
    assert ("ai.onnx", "Relu", 6) in keys and ("ai.graphcore", "Gelu", 1) in keys
    # The original's one internal (not public) operator (willow/src/op/addbias.cpp).
    internal = popart.OperatorIdentifier("ai.graphcore", "AddBias", 1)
    assert popart.getSupportedOperations(True) == [*supported, internal]
    with pytest.raises(TypeError, match="incompatible function arguments"):
        popart.getSupportedOperations("yes")


def test_supported_operation_definitions_follow_the_onnx_schemas():
    definitions = popart.getSupportedOperationsDefinition(False)
    relu = definitions[popart.OperatorIdentifier("ai.onnx", "Relu", 6)]
    schema = onnx.defs.get_schema("Relu", 6)
    assert [i.name for i in relu.inputs] == [p.name for p in schema.inputs]
    assert popart.DataType.FLOAT in relu.inputs[0].supportedTensors
    conv = definitions[popart.OperatorIdentifier("ai.onnx", "Conv", 1)]
    assert set(conv.attributes) == set(onnx.defs.get_schema("Conv", 1).attributes)


def _model_with_initializers(initializers, output_type=TensorProto.FLOAT):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", output_type, [2])
    inputs = [x] + [
        helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
        for tensor in initializers
    ]
    nodes = [helper.make_node("Add", ["x", initializers[0].name], ["y"])]
    graph = helper.make_graph(nodes, "g", inputs, [y], initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def test_graph_transformer_converts_doubles_to_floats_in_float_data():
    weights = numpy_helper.from_array(np.array([0.5, 1.5]), "w")
    model = _model_with_initializers([weights], TensorProto.DOUBLE)
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    transformer = popart.GraphTransformer(model.SerializeToString())
    transformer.convertDoublesToFloats()
    converted = onnx.load_from_string(transformer.getModelProto())
    onnx.checker.check_model(converted, full_check=True)
    assert list(converted.graph.initializer[0].float_data) == [0.5, 1.5]
    (result,) = onnxruntime.InferenceSession(converted.SerializeToString()).run(
        None, {"x": np.array([1.0, 2.0], np.float32)}
    )
    np.testing.assert_array_equal(result, [1.5, 3.5])


def test_graph_transformer_int64_conversion_refuses_overflow_unless_clipped():
    big = numpy_helper.from_array(np.array([2**40, -3], np.int64), "w")
    model = _model_with_initializers([big], TensorProto.INT64)
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.INT64
    transformer = popart.GraphTransformer(model.SerializeToString())
    with pytest.raises(popart.popart_exception, match="set 'clip' to 'true'"):
        transformer.convertINT64ToINT32()
    transformer.convertINT64ToINT32(clip=True)
    converted = onnx.load_from_string(transformer.getModelProto())
    assert list(converted.graph.initializer[0].int32_data) == [2**31 - 1, -3]
    assert converted.graph.input[0].type.tensor_type.elem_type == TensorProto.INT32


def test_graph_transformer_initializers_to_constants_and_unused_inputs():
    weights = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")
    unused = numpy_helper.from_array(np.array([9.0], np.float32), "unused")
    model = _model_with_initializers([weights, unused])
    transformer = popart.GraphTransformer(model.SerializeToString())
    transformer.removeUnusedInputs()
    assert [v.name for v in onnx.load_from_string(transformer.getModelProto()).graph.input] == [
        "x",
        "w",
    ]
    transformer.convertInitializersToConstants(["w"])
    converted = onnx.load_from_string(transformer.getModelProto())
    assert [node.op_type for node in converted.graph.node] == ["Constant", "Add"]
    assert not converted.graph.initializer
    (result,) = onnxruntime.InferenceSession(converted.SerializeToString()).run(
        None, {"x": np.array([1.0, 1.0], np.float32)}
    )
    np.testing.assert_array_equal(result, [2.0, 3.0])
    with pytest.raises(popart.popart_exception, match="not in the model initalizers"):
        transformer.convertInitializersToConstants(["nothing"])


def test_prepare_nodes_for_training_gives_batch_normalization_five_outputs():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 3, 2, 2])
    params = [builder.addInitializedInputTensor(np.ones(3, np.float32)) for _ in range(4)]
    (y,) = builder.aiOnnx.batchnormalization([x, *params], 1)
    builder.addOutputTensor(y)
    transformer = popart.GraphTransformer(builder.getModelProto())
    transformer.prepareNodesForTraining()
    (node,) = onnx.load_from_string(transformer.getModelProto()).graph.node
    assert len(node.output) == 5


def test_poplar_debug_info_written_as_the_original_test_reads_it(tmp_path):
    # After the original's tests/integration/debug_info_test.py.
    def bar(arg, debugContext):
        info = popart.DebugInfo(debugContext, "unit_test")
        info.setValue("arg", str(arg))

    def foo(arg, debugContext):
        info = popart.DebugInfo(debugContext, "unit_test")
        info.setValue("arg", str(arg))
        bar(123, debugContext=popart.DebugContext(info, "bar"))

    filename = str(tmp_path / "debug.json")
    popart.initializePoplarDebugInfo(filename, "json")
    foo(42, popart.DebugContext())
    popart.closePoplarDebugInfo()
    with open(filename, encoding="utf-8") as json_file:
        data = json.load(json_file)
    bar_context, foo_context = data["contexts"]
    strings = data["stringTable"]
    assert strings[int(foo_context["name"])] == "" and strings[int(bar_context["name"])] == "bar"
    assert bar_context["parentId"] == 1 == foo_context["id"]
    assert (bar_context["arg"], foo_context["arg"]) == ("123", "42")
    assert strings[int(foo_context["location"]["functionName"])] == (
        "test_poplar_debug_info_written_as_the_original_test_reads_it"
    )
    assert strings[int(bar_context["location"]["functionName"])] == "foo"
    assert strings[int(bar_context["location"]["fileName"])].endswith("test_original_names.py")


@pytest.mark.parametrize(
    "name",
    ["SoftmaxGradDirect", "NlllWithSoftmaxGradDirect", "SplitGradOpToConcat", "ScanToLoop",
     "LoopScanOut", "TransposeToIdentityOrReshapePattern", "Slice2SliceSubsample", "SplitOp",
     "PackedDataBlock", "AbsGradOp", "UpdateInplacePrioritiesForIpu"],
)  # fmt: skip
def test_pattern_names_of_the_original_registry(name):
    assert popart.Patterns([name]).isPatternEnabled(name)


def test_pattern_properties_map_to_the_registry_names():
    patterns = popart.Patterns(popart.PatternsLevel.NoPatterns)
    patterns.SoftMaxGradDirect = True
    assert patterns.isPatternEnabled("SoftmaxGradDirect")
    # Only the property is spelled SoftMax; as a pattern name it is unknown (patterns.cpp).
    with pytest.raises(popart.popart_exception, match="Unknown pattern SoftMaxGradDirect"):
        popart.Patterns(["SoftMaxGradDirect"])
    minimal = popart.Patterns(popart.PatternsLevel.Minimal)
    assert minimal.isPatternEnabled("ScanToLoop") and not minimal.isPatternEnabled("PadSum")
    assert not popart.Patterns().isPatternEnabled("Slice2SliceSubsample")


def test_opsets_print_as_the_original_python_wrapper():
    assert str(popart.Builder().aiOnnx) == "AiOnnx10"
    assert str(popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1}).aiOnnx) == "AiOnnx11"
    assert str(popart.Builder().aiOnnxOpset9) == "AiOnnx9"


def test_constant_11_takes_is_value_sparse_positionally():
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    value = np.arange(4, dtype=np.float32)
    c = builder.aiOnnx.constant(value, False, "named")
    assert onnx.load_from_string(builder.getModelProto()).graph.node[0].name == "named"
    builder.addOutputTensor(c)
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, {c: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({}, anchors))
    np.testing.assert_array_equal(anchors[c], value)
    with pytest.raises(popart.popart_exception, match="sparse_tensor' are currently not"):
        builder.aiOnnx.constant(value, True)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        builder.aiOnnx.constant(value, "a name where is_value_sparse goes")
    # Builder.reshape_const names its Constant by keyword, so it works on opset 11 too.
    x = builder.addInputTensor("FLOAT", [2, 2])
    assert builder.getTensorShape(builder.reshape_const(builder.aiOnnx, [x], [4])) == [4]
