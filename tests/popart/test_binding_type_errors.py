"""Arguments of the wrong type are pybind11's TypeError ("incompatible function arguments",
"__init__(): incompatible constructor arguments"), as the original's bindings raise it, for
builder methods, session constructors and the classes and methods popart.cpp binds; a value
of the right type is taken as pybind11 converts it (an int for a float, a bool for an int)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import popart

INCOMPATIBLE = "incompatible function arguments"


@pytest.fixture
def builder_and_input():
    builder = popart.Builder()
    return builder, builder.addInputTensor("FLOAT", [2, 3])


@pytest.mark.parametrize(
    "call",
    [
        lambda b, x: b.aiOnnx.relu(x),  # a str, not a list of ids
        lambda b, x: b.aiOnnx.add([x, 3]),  # a list holding an int
        lambda b, x: b.aiGraphcore.gelu((x, None)),
        lambda b, x: b.aiOnnx.leakyrelu([x], alpha="big"),
        lambda b, x: b.aiOnnx.transpose([x], perm="10"),
        lambda b, x: b.aiOnnx.split([x], "two"),
    ],
    ids=["str-args", "int-in-args", "none-in-args", "float-attribute", "ints-attribute",
         "num-outputs"],
)  # fmt: skip
def test_builder_operator_arguments_of_the_wrong_type(builder_and_input, call):
    builder, x = builder_and_input
    with pytest.raises(TypeError, match=INCOMPATIBLE):
        call(builder, x)


def test_an_unknown_tensor_id_is_not_a_type_error(builder_and_input):
    builder, _ = builder_and_input
    with pytest.raises(popart.popart_exception) as raised:
        builder.aiOnnx.relu(["no_such_tensor"])
    assert not isinstance(raised.value, TypeError)


def _model():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2])
    y = builder.aiOnnx.relu([x])
    builder.addOutputTensor(y)
    return builder.getModelProto(), y


@pytest.mark.parametrize("argument", ["dataFlow", "deviceInfo", "userOptions", "patterns"])
def test_session_arguments_of_the_wrong_type(argument):
    proto, y = _model()
    arguments = {
        "fnModel": proto,
        "dataFlow": popart.DataFlow(1, {y: popart.AnchorReturnType("All")}),
        "deviceInfo": popart.DeviceManager().createCpuDevice(),
        argument: 3,
    }
    with pytest.raises(TypeError, match=INCOMPATIBLE):
        popart.InferenceSession(**arguments)


def test_a_run_with_the_right_types_still_runs():
    proto, y = _model()
    session = popart.InferenceSession(
        proto,
        popart.DataFlow(1, {y: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    with pytest.raises(TypeError, match=INCOMPATIBLE):
        session.run("not a step io")
    x = onnx.load_from_string(proto).graph.input[0].name
    session.run(popart.PyStepIO({x: np.array([-1.0, 2.0], np.float32)}, anchors))
    np.testing.assert_array_equal(anchors[y], [0.0, 2.0])


# -- classes and methods popart.cpp binds ----------------------------------------------------

CONSTRUCTOR = "__init__(): incompatible constructor arguments"
ART = popart.AnchorReturnType


def _set_batch_serialization_settings(value):
    popart.SessionOptions().batchSerializationSettings = value


@pytest.mark.parametrize(
    "call, start",
    [
        (lambda b, x: popart.DataFlow("1", {}), CONSTRUCTOR),
        (lambda b, x: popart.DataFlow(1.0, {}), CONSTRUCTOR),  # an int parameter takes no float
        (lambda b, x: popart.DataFlow(1, 5), CONSTRUCTOR),
        (lambda b, x: popart.DataFlow(1, {x: 5}), CONSTRUCTOR),
        (lambda b, x: popart.DataFlow(1, {5: ART("All")}), CONSTRUCTOR),
        (lambda b, x: popart.DataFlow(1, {x}), CONSTRUCTOR),  # a set is not a List[str]
        (lambda b, x: popart.DataFlow(1, {}, ART("All")), CONSTRUCTOR),
        (lambda b, x: popart.DataFlow(1), CONSTRUCTOR),
        (lambda b, x: popart.TensorInfo(1, 2), CONSTRUCTOR),
        (lambda b, x: popart.TensorInfo("FLOAT", 2), CONSTRUCTOR),
        (lambda b, x: popart.TensorInfo("FLOAT", [2.5]), CONSTRUCTOR),
        (lambda b, x: _set_batch_serialization_settings(3), "(): incompatible function arguments"),
        (lambda b, x: popart.Patterns(5), CONSTRUCTOR),
        (lambda b, x: popart.Patterns({"InPlace"}), CONSTRUCTOR),
        (lambda b, x: popart.ConstSGD("x"), CONSTRUCTOR),
        (lambda b, x: popart.ConstSGD(0.1, weight_decay=None), CONSTRUCTOR),
        (lambda b, x: popart.ConstSGD(0.1, 0, 1, popart.ClipNormSettings([], 1.0)), CONSTRUCTOR),
        (lambda b, x: popart.DeviceManager().createCpuDevice(1), "createCpuDevice(): incompatible"),
        (lambda b, x: b.addInputTensor("FLOAT", 3), "addInputTensor(): incompatible"),
        (lambda b, x: b.addInputTensor("FLOAT", [2.0]), "addInputTensor(): incompatible"),
        (lambda b, x: b.addInputTensor(np.float32, [2]), "addInputTensor(): incompatible"),
        (lambda b, x: popart.AnchorReturnType(5), CONSTRUCTOR),
        (lambda b, x: popart.AnchorReturnType("EveryN", 2.0), CONSTRUCTOR),
        (lambda b, x: popart.AnchorReturnType("All", tileSet="IO"), CONSTRUCTOR),
        (lambda b, x: b.virtualGraph(x, "a"), "virtualGraph(): incompatible"),
        (lambda b, x: b.virtualGraph(1.5), "virtualGraph(): incompatible"),
        (lambda b, x: b.pipelineStage([x], 1), "pipelineStage(): incompatible"),  # str only
        (lambda b, x: b.executionPhase(x, "1"), "executionPhase(): incompatible"),
        (lambda b, x: b.getTensorShape(5), "getTensorShape(): incompatible"),
    ],
    ids=["DataFlow-str-batches", "DataFlow-float-batches", "DataFlow-int-anchors",
         "DataFlow-int-return-type", "DataFlow-int-id", "DataFlow-set-of-ids",
         "DataFlow-dict-and-return-type", "DataFlow-no-anchors", "TensorInfo-ints",
         "TensorInfo-int-shape", "TensorInfo-float-dim", "batchSerializationSettings-int",
         "Patterns-int", "Patterns-set", "ConstSGD-str", "ConstSGD-none",
         "ConstSGD-one-clip-norm", "createCpuDevice-argument", "addInputTensor-int-shape",
         "addInputTensor-float-dim", "addInputTensor-numpy-type", "AnchorReturnType-int",
         "AnchorReturnType-float-period", "AnchorReturnType-str-tile-set",
         "virtualGraph-str-value", "virtualGraph-float", "pipelineStage-list",
         "executionPhase-str-value", "getTensorShape-int"],
)  # fmt: skip
def test_bound_calls_with_arguments_of_the_wrong_type(builder_and_input, call, start):
    builder, x = builder_and_input
    with pytest.raises(TypeError) as raised:
        call(builder, x)
    assert str(raised.value).startswith(start)
    assert "The following argument types are supported:" in str(raised.value)


def test_the_message_lists_the_overloads_and_the_arguments():
    with pytest.raises(TypeError) as raised:
        popart.AnchorReturnType(5, tileSet=popart.TileSet.IO)
    message = str(raised.value)
    assert (
        "    2. popart_core.AnchorReturnType(anchorReturnTypeString: str, returnPeriod: int"
        in message
    )
    assert "Invoked with: 5; kwargs: tileSet=" in message
    assert "anchorReturnTypeString must be str, got 5 (int)" in message


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda b, x: popart.AnchorReturnType("NotAType"), "Invalid anchor return type ID"),
        (lambda b, x: popart.AnchorReturnType("EveryN"), "Must specify return period"),
        (lambda b, x: popart.AnchorReturnType("All", 2), "return period should not be supplied"),
        (lambda b, x: popart.DataFlow(0, {}), "must be greater than zero"),
        (lambda b, x: popart.TensorInfo("FLOAT", "[2]"), "invalid string for shape"),
        (lambda b, x: popart.Patterns(["NoSuchPattern"]), "Unknown pattern NoSuchPattern"),
        (lambda b, x: b.getTensorShape("no_such_tensor"), "unknown tensor id"),
        (lambda b, x: b.virtualGraph("no_such_tensor", 1), "could not find a unique node"),
    ],
)
def test_bad_values_of_the_right_type_are_popart_errors(builder_and_input, call, message):
    builder, x = builder_and_input
    with pytest.raises(popart.popart_exception, match=message) as raised:
        call(builder, x)
    assert not isinstance(raised.value, TypeError)


def test_calls_with_the_right_types_still_work(builder_and_input):
    builder, x = builder_and_input
    # DataFlow: pybind11 takes a bool or a numpy int for an int, any sequence for a list.
    assert popart.DataFlow(1, {}).nAnchors() == 0
    assert popart.DataFlow(True, {}).batchesPerStep() == 1
    assert popart.DataFlow(np.int64(2), (x,)).art(x) == ART("All")
    summed = popart.DataFlow(batchesPerStep=2, anchorIds=[x], anchorReturnType=ART("Sum"))
    assert summed.art(x) == ART("Sum")
    assert popart.DataFlow(4, {x: ART("EveryN", np.int32(2))}).art(x).rp() == 2
    assert ART("All", popart.TileSet.IO).tileSet() == popart.TileSet.IO
    # TensorInfo: a name and a list of ints, a numpy type, a DataType, a shape string.
    assert popart.TensorInfo("FLOAT", [2]).shape() == [2]
    assert popart.TensorInfo("FLOAT", (2, np.int64(3))).shape() == [2, 3]
    assert popart.TensorInfo(np.float32, [2]) == popart.TensorInfo(popart.DataType.FLOAT, [2])
    assert popart.TensorInfo("FLOAT", "(2,3)").shape() == [2, 3]
    # ConstSGD: an int (or a numpy float) for a float.
    for learning_rate in (0.1, 1, np.float32(0.5)):
        popart.ConstSGD(learning_rate)
    popart.ConstSGD(0.1, clip_norm_settings=[popart.ClipNormSettings.clipAllWeights(1.0)])
    # Patterns: nothing, a level or a list of names.
    assert popart.Patterns().isPatternEnabled("InPlace")
    popart.Patterns(popart.PatternsLevel.Default)
    assert not popart.Patterns(level=popart.PatternsLevel.NoPatterns).isPatternEnabled("InPlace")
    assert popart.Patterns(("InPlace",)).isPatternEnabled("InPlace")
    options = popart.SessionOptions()
    options.batchSerializationSettings = popart.BatchSerializationSettings(2)
    assert options.batchSerializationSettings.factor == 2
    assert popart.DeviceManager().createCpuDevice().type == popart.DeviceType.Cpu
    # The builder: shapes as any sequence of ints, settings and a debug context.
    y = builder.addInputTensor("FLOAT", (2, np.int64(3)))
    z = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]), "named")
    builder.addInputTensor("FLOAT", [2], popart.InputSettings(), "with_settings")
    assert builder.getTensorShape(y) == [2, 3] and builder.getTensorShape(z) == [2]
    w = builder.aiOnnx.relu([x])
    builder.virtualGraph(w, 1)
    builder.virtualGraph({w}, np.int64(2))
    builder.executionPhase(w, True)  # pybind11 takes a bool for an int
    with builder.virtualGraph(3):
        v = builder.aiOnnx.relu([x])
    assert builder.getVirtualGraph(v) == 3 and builder.getVirtualGraph(w) == 2
