"""popart.Builder: tensors, ids, name scopes, models in and out, opset versions, errors."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import popart


def _model(builder: popart.Builder) -> onnx.ModelProto:
    model = onnx.load_from_string(builder.getModelProto())
    onnx.checker.check_model(model, full_check=True)
    return model


# -- ids ---------------------------------------------------------------------------------------


def test_generated_ids_follow_popart_scheme():
    builder = popart.Builder()
    a = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    b = builder.addInputTensor("FLOAT", [2])
    first = builder.aiOnnx.add([a, b])
    second = builder.aiOnnx.add([first, b])
    third = builder.aiOnnx.add([second, b])
    # A pool needs spatial dims (willow/src/builder_helper.cpp, verifyWindowParameters).
    pooled = builder.aiOnnx.maxpool([builder.addInputTensor("FLOAT", [1, 1, 2])], 1, [1])
    assert (a, b) == ("input", "input/1")
    assert (first, second, third) == ("Add:0", "Add:0/1", "Add:0/2")
    assert pooled == ["MaxPool:0"]
    values, indices = builder.aiOnnx.topk([a, builder.aiOnnx.constant(np.array([1], np.int64))])
    assert (values, indices) == ("TopK:0", "TopK:1")


def test_debug_context_names_inputs_and_nodes_not_op_outputs():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2], "x")
    x_again = builder.addInputTensor("FLOAT", [2], "x")
    weight = builder.addInitializedInputTensor(np.ones(2, np.float32), "weight")
    out = builder.aiOnnx.mul([x, weight], "scale_it")
    assert (x, x_again, weight, out) == ("x", "x/1", "weight", "Mul:0")
    node = _model(builder).graph.node[0]
    assert node.name == "scale_it"
    unnamed = builder.addInitializedInputTensor(np.ones(2, np.float32))
    assert unnamed == "init_input"


def test_name_scopes_prefix_ids_and_nest():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    with builder.nameScope("outer"):
        assert builder.getNameScope() == "outer/"
        a = builder.aiOnnx.relu([x])
        with builder.nameScope("inner"):
            b = builder.aiOnnx.relu([a])
            w = builder.addInitializedInputTensor(np.zeros(2, np.float32), "w")
            assert builder.getNameScope("t") == "outer/inner/t"
        c = builder.aiOnnx.relu([b])
    d = builder.aiOnnx.relu([c])
    assert (a, b, w, c, d) == (
        "outer/Relu:0",
        "outer/inner/Relu:0",
        "outer/inner/w",
        "outer/Relu:0/1",
        "Relu:0",
    )
    assert builder.getNameScope() == ""


def test_loaded_model_ids_are_not_reused():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    builder.addOutputTensor(builder.aiOnnx.relu([x]))
    loaded = popart.Builder(builder.getModelProto())
    assert loaded.aiOnnx.relu(["input"]) == "Relu:0/1"
    assert loaded.addInputTensor("FLOAT", [1]) == "input/1"


# -- tensors and queries -----------------------------------------------------------------------


def test_inputs_initializers_outputs_and_queries():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT16", [4, 3]))
    w = builder.addInitializedInputTensor(np.arange(6, dtype=np.float16).reshape(3, 2))
    y = builder.aiOnnx.matmul([x, w])
    builder.addOutputTensor(y)
    assert builder.getInputTensorIds() == [x, w]
    assert builder.getOutputTensorIds() == [y]
    assert builder.getTrainableTensorIds() == [w]
    assert builder.isInitializer(w) and not builder.isInitializer(x)
    assert builder.getTensorShape(y) == [4, 2]
    assert builder.getTensorShape(x) == [4, 3]
    assert builder.getTensorDtypeString(y) == "float16"
    z = builder.aiOnnx.relu([y])
    assert z in builder.getValueTensorIds()
    model = _model(builder)
    assert [tensor.name for tensor in model.graph.initializer] == [w]
    assert {i.name for i in model.graph.input} == {x, w}  # a weight is also a graph input
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(model.graph.initializer[0]),
        np.arange(6, dtype=np.float16).reshape(3, 2),
    )


def test_shapes_are_inferred_through_many_ops():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [1, 3, 8, 8])
    w = builder.addInitializedInputTensor(np.zeros((4, 3, 3, 3), np.float32))
    conv = builder.aiOnnx.conv([x, w], pads=[1, 1, 1, 1], strides=[2, 2])
    pool = builder.aiOnnx.maxpool([conv], 1, [2, 2], strides=[2, 2])[0]
    flat = builder.aiOnnx.flatten([pool])
    assert builder.getTensorShape(conv) == [1, 4, 4, 4]
    assert builder.getTensorShape(pool) == [1, 4, 2, 2]
    assert builder.getTensorShape(flat) == [1, 16]
    assert builder.reshape_const(builder.aiOnnx, [flat], [4, 4]) == "Reshape:0"
    assert builder.getTensorShape("Reshape:0") == [4, 4]


def test_untyped_input_has_no_shape():
    builder = popart.Builder().createSubgraphBuilder()
    x = builder.addUntypedInputTensor("free")
    assert x == "free"
    # The original reads an untyped tensor as no dims of an undefined type.
    assert builder.getTensorShape(x) == []
    assert builder.getTensorDtypeString(x) == "undefined"


def test_input_settings_and_variable_settings_are_recorded_in_metadata():
    class InputSettings:  # the session module's class, as the builder sees it
        def tileSet(self):
            return "IO"

        def exchangeStrategy(self):
            return "OverlapLoops"

        def replicatedStreamMode(self):
            return "Broadcast"

    class CommGroup:
        type, replicaGroupSize = 1, 2

    class VariableSettings:
        def getSharedVariableDomain(self):
            return CommGroup()

        def getRetrievalMode(self):
            return "AllReplicas"

    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2], InputSettings(), "streamed")
    w = builder.addInitializedInputTensor(np.zeros(2, np.float32), VariableSettings(), "grouped")
    metadata = {entry.key: entry.value for entry in _model(builder).metadata_props}
    assert x == "streamed" and w == "grouped"
    assert '"replicatedStreamMode": "Broadcast"' in metadata["__input_settings:streamed"]
    assert '"commGroupType": "Consecutive"' in metadata["__variable_settings:grouped"]
    assert '"retrievalMode": "AllReplicas"' in metadata["__variable_settings:grouped"]


def test_embed_replication_factor_and_graph_name():
    builder = popart.Builder()
    builder.embedReplicationFactor(4)
    builder.setGraphName("my_graph")
    model = _model(builder)
    assert {e.key: e.value for e in model.metadata_props}["__replication_factor"] == "4"
    assert model.graph.name == "my_graph"


def test_custom_op_adds_a_node_in_its_domain():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    outputs = builder.customOp(
        "MyOp", 3, "com.acme", [x], {"alpha": 0.5, "n": 2, "names": ["a", "b"]}, 2, "mine"
    )
    assert outputs == ["MyOp:0", "MyOp:1"]
    model = _model(builder)
    node = model.graph.node[0]
    assert (node.op_type, node.domain, node.name) == ("MyOp", "com.acme", "mine")
    # The original adds a custom op at version 1 of its domain, whatever its opVersion.
    assert {(o.domain, o.version) for o in model.opset_import} >= {("com.acme", 1)}
    assert builder.getFloatNodeAttribute("alpha", set(outputs)) == 0.5
    assert builder.getStringVectorNodeAttribute("names", outputs) == ["a", "b"]


# -- models in and out -------------------------------------------------------------------------


def _small_builder() -> tuple[popart.Builder, str]:
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 2], "x")
    w = builder.addInitializedInputTensor(np.eye(2, dtype=np.float32), "w")
    y = builder.aiOnnx.matmul([x, w])
    builder.addOutputTensor(y)
    return builder, y


def test_get_model_proto_returns_valid_bytes():
    builder, y = _small_builder()
    data = builder.getModelProto()
    assert isinstance(data, bytes)
    model = _model(builder)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 10)]
    assert model.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT


def test_load_from_bytes_and_from_file_and_keep_building(tmp_path):
    builder, y = _small_builder()
    path = tmp_path / "model.onnx"
    builder.saveModelProto(str(path))
    for source in (builder.getModelProto(), str(path), path):
        loaded = popart.Builder(source)
        assert loaded.getInputTensorIds() == ["x", "w"]
        assert loaded.getOutputTensorIds() == [y]
        assert loaded.isInitializer("w")
        z = loaded.aiOnnx.relu([y])
        loaded.addOutputTensor(z)
        assert loaded.getTensorShape(z) == [2, 2]
        _model(loaded)


def test_save_initializers_externally(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    builder, _ = _small_builder()
    builder.saveInitializersExternally(["w"], "weights.bin")
    assert os.path.getsize("weights.bin") == 16
    builder.saveModelProto("model.onnx")
    model = onnx.load("model.onnx")  # loads the external data back
    np.testing.assert_array_equal(
        onnx.numpy_helper.to_array(model.graph.initializer[0]), np.eye(2, dtype=np.float32)
    )
    with pytest.raises(popart.popart_exception, match="Tensor 'x' is not an initializer"):
        builder.saveInitializersExternally(["x"], "other.bin")


@pytest.mark.parametrize(
    "source, message",
    [
        (b"this is not a protobuf \xff\xff\xff", "Failed to load a ModelProto from the string"),
        ("/no/such/file.onnx", "valid path to an existing onnx model file"),
        (12, "must be serialized ModelProto bytes or an .onnx file name"),
    ],
)
def test_bad_model_sources_raise(source, message):
    with pytest.raises(popart.popart_exception, match=message):
        popart.Builder(source)


def test_truncated_model_bytes_and_file_raise(tmp_path):
    builder, _ = _small_builder()
    data = builder.getModelProto()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 3):
        with pytest.raises(popart.popart_exception):
            popart.Builder(data[:cut])
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(popart.popart_exception, match="truncated.onnx"):
        popart.Builder(str(path))


def test_invalid_model_is_rejected_on_load():
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["missing"], ["y"])], "g", [], [])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 10)])
    with pytest.raises(popart.popart_exception, match="not a valid ONNX model"):
        popart.Builder(model.SerializeToString())


# -- opset versions ----------------------------------------------------------------------------


def test_default_opsets_are_the_originals():
    assert (popart.defaultAiOnnxOpset, popart.defaultAiOnnxMlOpset) == (10, 1)
    assert popart.defaultAiGraphcoreOpset == 1
    builder = popart.Builder()
    assert builder.aiOnnx.version == 10
    assert isinstance(builder.aiOnnx, popart.AiOnnxOpset10)
    assert builder.opsets == {"ai.onnx": 10, "ai.onnx.ml": 1, "ai.graphcore": 1}


def test_opsets_argument_chooses_the_version():
    builder = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    assert isinstance(builder.aiOnnx, popart.AiOnnxOpset9)
    x = builder.addInputTensor("FLOAT", [2])
    builder.addOutputTensor(builder.aiOnnx.relu([x]))
    versions = {o.domain: o.version for o in _model(builder).opset_import}
    assert versions == {"": 9, "ai.graphcore": 1}


def test_first_explicit_opset_fixes_the_version_and_mixing_raises():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    builder.aiOnnxOpset11.relu([x])
    assert builder.aiOnnx.version == 11
    with pytest.raises(popart.popart_exception, match="already defined as 11"):
        _ = builder.aiOnnxOpset9
    with pytest.raises(RuntimeError, match="Invalid opset 'aiOnnxOpset10' selected"):
        builder.aiOnnxOpset10.relu([x])


def test_mixing_with_declared_opset_raises():
    builder = popart.Builder(opsets={"ai.onnx": 9})
    with pytest.raises(popart.popart_exception, match="already defined as 9"):
        _ = builder.aiOnnxOpset11


def test_subgraph_builders_share_the_opset_version():
    builder = popart.Builder()
    _ = builder.aiOnnxOpset8  # selecting an opset fixes the model's version
    child = builder.createSubgraphBuilder()
    with pytest.raises(popart.popart_exception):
        _ = child.aiOnnxOpset11
    assert child.aiOnnx.version == 8


@pytest.mark.parametrize("name", ["aiOnnxOpset5", "aiOnnxOpset12"])
def test_unknown_onnx_opset_versions_raise_value_error(name):
    with pytest.raises(ValueError, match="Unsupported or unrecognized ai.onnx version"):
        getattr(popart.Builder(), name)


@pytest.mark.parametrize("opsets", [{"ai.onnx": 12}, {"ai.onnx": 5}, {"ai.graphcore": 2}])
def test_unknown_versions_in_opsets_argument_raise(opsets):
    with pytest.raises(ValueError) as raised:
        popart.Builder(opsets=opsets)
    assert isinstance(raised.value, popart.popart_exception)


def test_opset_classes_check_their_versions():
    builder = popart.Builder()
    with pytest.raises(ValueError, match="ai.graphcore version"):
        popart.builder.AiGraphcore(builder, 2)
    with pytest.raises(ValueError, match="ai.OnnxMl version"):
        popart.builder.AiOnnxMl(builder, 2)
    assert isinstance(popart.builder.AiOnnx(builder, 7), popart.AiOnnxOpset7)
    with pytest.raises(ValueError):
        popart.builder.AiOnnx(builder, 13)


# -- errors ------------------------------------------------------------------------------------


def test_unknown_tensor_ids_raise_naming_the_id_and_op():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    with pytest.raises(popart.popart_exception, match=r"Add .*unknown tensor id 'nope'"):
        builder.aiOnnx.add([x, "nope"])
    with pytest.raises(popart.popart_exception, match="unknown tensor id 'nope'"):
        builder.addOutputTensor("nope")
    with pytest.raises(popart.popart_exception, match="unknown tensor id 'nope'"):
        builder.getTensorShape("nope")
    with pytest.raises(popart.popart_exception, match="unknown tensor id 'nope'"):
        builder.aiGraphcore.gelu(["nope"])


def test_wrong_argument_counts_raise_naming_the_op():
    builder = popart.Builder(opsets={"ai.onnx": 11})
    x = builder.addInputTensor("FLOAT", [2])
    with pytest.raises(
        popart.popart_exception, match=r"Add has invalid number of inputs 3. Must be between 2..2"
    ):
        builder.aiOnnx.add([x, x, x])
    with pytest.raises(
        popart.popart_exception, match=r"Gemm has invalid number of inputs 1. Must be between 2..3"
    ):
        builder.aiOnnx.gemm([x])
    with pytest.raises(popart.popart_exception, match=r"Atan2 \(ai.graphcore\): expected 2"):
        builder.aiGraphcore.atan2([x])
    with pytest.raises(
        popart.popart_exception,
        match="MaxPool has an invalid number of outputs 3. Must be between 1..2",
    ):
        builder.aiOnnx.maxpool([x], 3, [1])
    # pybind11's TypeError, as the original's binding (args is a List[str]).
    with pytest.raises(TypeError, match=r"relu\(\): incompatible function arguments"):
        builder.aiOnnx.relu(x)


def test_bad_attribute_types_raise_naming_the_attribute():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [1, 1, 2, 2])
    # The original's bindings take each attribute as its C++ type: anything else is
    # pybind11's TypeError (which is also a popart_exception here).
    with pytest.raises(popart.popart_exception, match="kernel_shape must be List\\[int\\]"):
        builder.aiOnnx.averagepool([x], kernel_shape="2x2")
    with pytest.raises(
        TypeError, match=r"(?s)gemm\(\): incompatible function.*alpha must be float"
    ):
        builder.aiOnnx.gemm([x, x, x], alpha="big")
    with pytest.raises(TypeError, match="group must be int, got 1.5"):
        builder.aiOnnx.conv([x, x], group=1.5)
    with pytest.raises(popart.popart_exception, match="attribute 'scale' must be a number"):
        builder.aiGraphcore.scale([x], "two")
    with pytest.raises(popart.popart_exception, match="attribute 'to' is required"):
        builder.aiOnnx.cast([x], None)
    with pytest.raises(TypeError):
        builder.aiOnnx.relu([x], no_such_attribute=1)


def test_duplicate_output_and_bad_inputs():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    builder.addOutputTensor(x)
    # As in the original, a tensor added twice is two outputs (the second a copy).
    builder.addOutputTensor(x)
    assert len(builder.getOutputTensorIds()) == 2
    with pytest.raises(popart.popart_exception):
        builder.addInputTensor("NOT_A_TYPE", [2])
    with pytest.raises(TypeError):
        builder.addInputTensor("FLOAT")
    with pytest.raises(popart.popart_exception, match="no parent graph"):
        builder.addInputTensorFromParentGraph(x)
