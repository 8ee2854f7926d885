"""IPU annotations (virtualGraph, pipelineStage, ...) and the node attribute API."""

import numpy as np
import onnx
import pytest

import popart
from openipu._src.popart.builder import annotation_names as names
from openipu._src.popart.builder.settings_encoding import decode_tensor_location


def _builder_with_input():
    builder = popart.Builder()
    return builder, builder.addInputTensor("FLOAT", [2, 2])


def _attributes(builder, output):
    model = onnx.load_from_string(builder.getModelProto())
    onnx.checker.check_model(model, full_check=True)
    node = next(node for node in model.graph.node if output in node.output)
    # Every node also carries the builder's debug info id (checked in test_builder_test.py).
    return {
        a.name: onnx.helper.get_attribute_value(a)
        for a in node.attribute
        if a.name != "__debug_info_id"
    }


def test_context_managers_annotate_nodes_created_inside_and_nest():
    builder, x = _builder_with_input()
    assert not builder.hasVirtualGraph()
    with builder.virtualGraph(1), builder.pipelineStage(2), builder.executionPhase(3):
        assert (builder.getVirtualGraph(), builder.getPipelineStage()) == (1, 2)
        assert builder.getExecutionPhase() == 3
        a = builder.aiOnnx.relu([x])
        with builder.virtualGraph(0):
            b = builder.aiOnnx.relu([a])
        c = builder.aiGraphcore.gelu([b])
    d = builder.aiOnnx.relu([c])
    assert not (
        builder.hasVirtualGraph() or builder.hasPipelineStage() or builder.hasExecutionPhase()
    )
    assert _attributes(builder, a) == {
        "__ipu_number": 1,
        "__pipeline_stage": 2,
        "__execution_phase": 3,
    }
    assert _attributes(builder, b)["__ipu_number"] == 0
    assert _attributes(builder, c)["__ipu_number"] == 1  # graphcore ops too
    assert _attributes(builder, d) == {}
    assert builder.getVirtualGraph(a) == 1 and builder.getVirtualGraph({b}) == 0


def test_getters_without_a_context_raise():
    builder, _ = _builder_with_input()
    for getter in (builder.getVirtualGraph, builder.getPipelineStage, builder.getExecutionPhase):
        with pytest.raises(popart.popart_exception, match="not set in current scope"):
            getter()


def test_annotation_methods_also_set_existing_nodes():
    builder, x = _builder_with_input()
    y = builder.aiOnnx.matmul([x, x])
    builder.virtualGraph(y, 3)
    builder.pipelineStage(y, 1)
    builder.executionPhase({y}, 2)
    builder.virtualGraph([y], 4)  # replaces the earlier value
    attributes = _attributes(builder, y)
    assert (attributes["__ipu_number"], attributes["__pipeline_stage"]) == (4, 1)
    assert attributes["__execution_phase"] == 2
    with pytest.raises(TypeError, match=r"^virtualGraph\(\): incompatible function arguments"):
        builder.virtualGraph(y, "one")


def test_recompute_annotations():
    builder, x = _builder_with_input()
    y = builder.aiOnnx.relu([x])
    assert not builder.getRecomputeOutputInBackwardPass(y)
    builder.recomputeOutputInBackwardPass(y)
    assert builder.getRecomputeOutputInBackwardPass(y)
    assert _attributes(builder, y)[names.RECOMPUTE_OUTPUT] == int(popart.RecomputeType.Recompute)
    builder.recomputeOutputInBackwardPass({y}, popart.RecomputeType.Checkpoint)
    assert not builder.getRecomputeOutputInBackwardPass({y})
    with builder.recomputeOutput(popart.RecomputeType.Recompute):
        z = builder.aiOnnx.relu([y])
    assert builder.getRecomputeOutputInBackwardPass(z)
    (kept,) = builder.checkpointOutput([z])
    assert kept == "Identity:0"
    assert _attributes(builder, kept)[names.RECOMPUTE_OUTPUT] == int(
        popart.RecomputeType.Checkpoint
    )
    with pytest.raises(popart.popart_exception, match="not a RecomputeType"):
        builder.recomputeOutputInBackwardPass(y, "Sometimes")


def test_per_node_settings():
    builder, x = _builder_with_input()
    y = builder.aiOnnx.matmul([x, x])
    builder.setAvailableMemoryProportion(y, 0.3)
    builder.setPartialsType(y, "half")  # kept as given (willow/src/builder.cpp)
    builder.setSerializeMatMul({y}, "output_channels", 4, True)
    builder.setInplacePreferences(y, {"ReluInplace": 10.0, "AddLhsInplace": 5.0})
    builder.excludePatterns(y, ["MatMulOp"])
    assert builder.getPartialsType(y) == "half"
    attributes = _attributes(builder, y)
    assert attributes["__available_memory_proportion"] == pytest.approx(0.3)
    assert attributes["__partials_type"] == b"half"
    assert attributes["__serialize_matmul_mode"] == b"output_channels"
    assert (
        attributes["__serialize_matmul_factor"],
        attributes["__serialize_matmul_precision"],
    ) == (4, 1)
    assert attributes["__inplace_op_names"] == [b"ReluInplace", b"AddLhsInplace"]
    assert attributes["__inplace_op_priorities"] == [10.0, 5.0]
    assert attributes["__exclude_patterns"] == [b"MatMulOp"]
    z = builder.aiOnnx.relu([y])
    assert builder.getPartialsType(z) == "FLOAT"  # the default
    builder.setSerializeMatMul({z}, "none")
    assert not builder.nodeHasAttribute("__serialize_matmul_mode", {z})


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda b, y: b.setAvailableMemoryProportion(y, 1.1), r"must be in \(0,1\], got 1.1"),
        (lambda b, y: b.setAvailableMemoryProportion(y, 0.0), r"must be in \(0,1\], got 0.0"),
        (
            lambda b, y: b.setSerializeMatMul({y}, "diagonal"),
            "^Unsupported mat mul serialization mode 'diagonal'. Supported modes are",
        ),
        (lambda b, y: b.setEnableConvDithering(y, 2), "enableConvDithering must be a bool value"),
        (lambda b, y: b.setEnableConvDithering(y, 1), "only be called on convolutions .*: MatMul"),
        (
            lambda b, y: b.setPartialsType("Nothing:0", "FLOAT"),
            r"could not find a unique node .*Nothing:0",
        ),
    ],
)
def test_per_node_settings_validate(call, message):
    builder, x = _builder_with_input()
    y = builder.aiOnnx.matmul([x, x])
    with pytest.raises(popart.popart_exception, match=message):
        call(builder, y)


def test_output_tensor_location_schedule_priority_comm_group_outline():
    class CommGroup:
        type, replicaGroupSize = popart.CommGroupType.Orthogonal, 2

    class Location:
        storage, loadTileSet, storageTileSet = "OffChip", "IO", "Compute"
        replicatedTensorSharding, shardingDomain = "On", CommGroup()

    builder, x = _builder_with_input()
    with builder.outputTensorLocation(Location()), builder.schedulePriority(-1.5):
        with builder.commGroup(1, 4), builder.outlineAttributes({"layer": 3}):
            with builder.outlineAttributes({"part": "a"}):
                y = builder.aiOnnx.relu([x])
    builder.outputTensorLocation(x_default := builder.aiOnnx.relu([y]))  # default location
    attributes = _attributes(builder, y)
    assert decode_tensor_location(attributes["__output_tensor_location"]) == {
        "storage": "OffChip",
        "loadTileSet": "IO",
        "storageTileSet": "Compute",
        "replicatedTensorSharding": "On",
        "shardingDomain": ("Orthogonal", 2),
    }
    assert attributes["__schedule_priority"] == -1.5
    assert attributes["__collectiveCommGroup"] == [1, 4]
    assert attributes["__outline"] == [b"layer", b"3", b"part", b"a"]
    assert _attributes(builder, x_default)["__output_tensor_location"] == [0, 0, 0, 0, 0, 0]


def test_generic_node_attribute_api():
    builder, x = _builder_with_input()
    y = builder.aiOnnx.relu([x])
    values = {
        "an_int": 3,
        "ints": [1, 2],
        "a_float": 0.25,
        "floats": [0.5, 1.5],
        "a_string": "hi",
        "strings": ["a", "b"],
    }
    for name, value in values.items():
        builder.addNodeAttribute(name, value, {y})
    assert builder.getAllNodeAttributeNames({y}) == ["__debug_info_id", *values]
    assert builder.getInt64NodeAttribute("an_int", {y}) == 3
    assert builder.getInt64VectorNodeAttribute("ints", {y}) == [1, 2]
    assert builder.getFloatNodeAttribute("a_float", {y}) == 0.25
    assert builder.getFloatVectorNodeAttribute("floats", {y}) == [0.5, 1.5]
    assert builder.getStringNodeAttribute("a_string", {y}) == "hi"
    assert builder.getStringVectorNodeAttribute("strings", {y}) == ["a", "b"]
    assert builder.nodeHasAttribute("an_int", {y})
    builder.removeNodeAttribute("an_int", {y})
    assert not builder.nodeHasAttribute("an_int", {y})


def test_node_attribute_api_errors():
    builder, x = _builder_with_input()
    y = builder.aiOnnx.relu([x])
    builder.addNodeAttribute("n", 1, {y})
    with pytest.raises(popart.popart_exception, match="Node already has attribute n."):
        builder.addNodeAttribute("n", 2, {y})
    with pytest.raises(popart.popart_exception, match="is INT, not FLOAT"):
        builder.getFloatNodeAttribute("n", {y})
    with pytest.raises(popart.popart_exception, match="Node does not have an attribute m."):
        builder.getInt64NodeAttribute("m", {y})
    with pytest.raises(
        popart.popart_exception, match="Cannot remove attribute m as it does not exist."
    ):
        builder.removeNodeAttribute("m", {y})
    with pytest.raises(popart.popart_exception, match="could not find a unique node"):
        builder.nodeHasAttribute("n", {"Other:0"})
    with pytest.raises(popart.popart_exception, match="could not find a unique node"):
        builder.getAllNodeAttributeNames({x})  # a graph input has no node
    with pytest.raises(popart.popart_exception, match="attribute 'bad' must be"):
        builder.addNodeAttribute("bad", {"a": 1}, {y})


def test_annotations_survive_a_round_trip_through_bytes():
    builder, x = _builder_with_input()
    with builder.virtualGraph(2):
        y = builder.aiOnnx.add([x, x])
    loaded = popart.Builder(builder.getModelProto())
    assert loaded.getVirtualGraph(y) == 2
    weights = np.ones((2, 2), np.float32)
    with loaded.pipelineStage(5):
        z = loaded.aiOnnx.matmul([y, loaded.addInitializedInputTensor(weights)])
    assert loaded.getInt64NodeAttribute("__pipeline_stage", {z}) == 5
