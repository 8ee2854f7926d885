"""Arguments of the wrong type are pybind11's TypeError ("incompatible function arguments"),
as the original's bindings raise it, for builder operators and session constructors."""

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
