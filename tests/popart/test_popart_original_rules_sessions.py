"""Session-side inputs the original accepts (or refuses with its own exception type), as
user programs: each test cites where the original decides."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from small_model import build_small_model, reference_outputs

import popart


@pytest.fixture
def device():
    return popart.DeviceManager().createIpuModelDevice({})


def _small_session(device, options=None):
    model = build_small_model()
    session = popart.InferenceSession(
        model.proto, popart.DataFlow(1, [model.y]), device, userOptions=options
    )
    session.prepareDevice()
    return model, session


def _run(model, session, x):
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({model.x: x}, anchors))
    return anchors[model.y]


def _random_session(device):
    builder = popart.Builder()
    shape = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    noise = builder.aiOnnx.randomuniformlike([shape])
    out = builder.aiOnnx.add([shape, noise])
    builder.addOutputTensor(out)
    session = popart.InferenceSession(builder.getModelProto(), popart.DataFlow(1, [out]), device)
    session.prepareDevice()
    return session, shape, out


def test_random_seed_takes_a_bool_and_refuses_out_of_range_with_type_error(device):
    # setRandomSeed(uint64_t) is a pybind11 binding (python/popart/popart_core/popart.cpp):
    # a bool is an int to it, a value outside uint64 is its TypeError.
    session, x, out = _random_session(device)
    zeros = np.zeros((2, 3), np.float32)

    def draw(seed):
        session.setRandomSeed(seed)
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x: zeros}, anchors))
        return anchors[out].copy()

    np.testing.assert_array_equal(draw(True), draw(1))
    for bad in (2**64, -1):
        with pytest.raises(TypeError):
            session.setRandomSeed(bad)


def test_rng_state_values_outside_uint32_are_type_errors(device):
    # setRNGState(std::vector<uint32_t>): pybind11 refuses the value before the size check.
    options = popart.SessionOptions()
    options.enableLoadAndOffloadRNGState = True
    model, session = _small_session(device, options)
    state = session.getRNGState()
    with pytest.raises(TypeError):
        session.setRNGState([2**32] * len(state))
    with pytest.raises(TypeError):
        session.setRNGState([-1])  # the wrong size too: the type error comes first
    session.setRNGState(state)
    assert session.getRNGState() == state
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(_run(model, session, x), reference_outputs(model, x)[model.y])


def test_executable_file_names_may_be_bytes_and_other_types_are_type_errors(device, tmp_path):
    # compileAndExport and loadExecutable take `const std::string &`: pybind11 takes bytes too.
    model = build_small_model()
    path = str(tmp_path / "small.popef").encode()
    exporter = popart.InferenceSession(model.proto, popart.DataFlow(1, [model.y]), device)
    exporter.compileAndExport(path)
    session = popart.InferenceSession(model.proto, popart.DataFlow(1, [model.y]), device)
    session.loadExecutable(path)
    session.prepareDevice()
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(_run(model, session, x), reference_outputs(model, x)[model.y])
    fresh = popart.InferenceSession(model.proto, popart.DataFlow(1, [model.y]), device)
    with pytest.raises(TypeError):
        fresh.loadExecutable(5)
    with pytest.raises(TypeError):
        exporter.compileAndExport(None)


def test_from_ir_refuses_a_non_ir_with_type_error(device):
    model, session = _small_session(device)
    with pytest.raises(TypeError):
        popart.InferenceSession.fromIr(object(), device)
    with pytest.raises(popart.popart_exception, match="Must pass valid DeviceInfo"):
        popart.InferenceSession.fromIr(session.getIr(), None)


def test_an_opset_imported_twice_runs_its_largest_version(device):
    # willow/src/ir.cpp, Ir::getOpSetVersionFromModel: the largest version of the domain.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 9), helper.make_opsetid("ai.onnx", 11)]
    ).SerializeToString()
    session = popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), device)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    x = np.array([-2.0, 0.5, 3.0], np.float32)
    session.run(popart.PyStepIO({"x": x}, anchors))
    np.testing.assert_array_equal(anchors["y"], np.maximum(x, 0))


def test_variable_settings_as_the_original():
    # willow/src/variablesettings.cpp: verify accepts every retrieval mode; getStride() is the
    # stride member, 0 for settings made from a CommGroup; a shape mismatch and a grouped
    # CommGroup of size 0 are internal errors.
    settings = popart.VariableSettings(popart.VariableRetrievalMode.AllReduceReplicas)
    settings.verify()
    assert settings.numReplicasReturningVariable(4) == 1
    orthogonal = popart.VariableSettings(popart.CommGroup(popart.CommGroupType.Orthogonal, 2))
    assert orthogonal.getStride() == 0
    assert orthogonal.getReplicaGrouping(8).getStride() == 4
    with pytest.raises(popart.popart_internal_exception, match="should match numGroups: 4"):
        orthogonal.shapeOnReplica([3, 2], 8, "w")
    # Its constructors verify (variablesettings.cpp), so the empty group fails at once.
    empty_group = popart.CommGroup(popart.CommGroupType.Consecutive, 0)
    with pytest.raises(popart.popart_internal_exception, match="VariableSettings had 1 errors"):
        popart.VariableSettings(empty_group)


def test_devices_that_cannot_run_raise_runtime_errors(device):
    # willow/src/popx/devicex.cpp, loadEngineAndConnectStreams: runtime_error.
    model = build_small_model()
    offline = popart.DeviceManager().createOfflineIPUDevice({"numIPUs": 1})
    session = popart.InferenceSession(model.proto, popart.DataFlow(1, [model.y]), offline)
    session.prepareDevice()
    with pytest.raises(popart.popart_runtime_error):
        session.run(popart.PyStepIO({model.x: np.zeros((2, 4), np.float32)}, {}))
