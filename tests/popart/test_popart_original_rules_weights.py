"""readWeights / writeWeights buffers, VariableSettings' constructors and loadExecutable's
argument, as user programs: each test cites where the original decides."""

from __future__ import annotations

import numpy as np
import pytest

import popart


def _model():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    w = builder.addInitializedInputTensor(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    y = builder.aiOnnx.matmul([x, w])
    builder.addOutputTensor(y)
    return builder.getModelProto(), x, w, y


def _session(constant_weights=False):
    proto, x, w, y = _model()
    options = popart.SessionOptions()
    options.constantWeights = constant_weights
    session = popart.InferenceSession(
        proto,
        popart.DataFlow(1, [y]),
        popart.DeviceManager().createCpuDevice(),
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    session.weightsToHost()
    return session, w


W = np.arange(12, dtype=np.float32).reshape(4, 3)


# -- readWeights: only the byte counts must agree (devicex.cpp:931-941, hostStreamToHost) ------


def test_read_weights_into_another_shape_of_the_same_byte_count():
    session, w = _session()
    target = np.zeros((2, 6), np.float32)
    session.readWeights(popart.PyWeightsIO({w: target}))
    np.testing.assert_array_equal(target, W.reshape(2, 6))


def test_read_weights_copies_bytes_into_another_dtype_of_the_same_size():
    session, w = _session()
    target = np.zeros((4, 3), np.int32)
    session.readWeights(popart.PyWeightsIO({w: target}))
    np.testing.assert_array_equal(target, W.view(np.int32))
    halves = np.zeros(24, np.float16)  # twice as many elements of half the size
    session.readWeights(popart.PyWeightsIO({w: halves}))
    np.testing.assert_array_equal(halves.view(np.float32).reshape(4, 3), W)


@pytest.mark.parametrize("shape", [(4, 2), (4, 4), (0,)])
def test_read_weights_into_another_byte_count_is_a_runtime_error(shape):
    session, w = _session()
    target = np.zeros(shape, np.float32)
    with pytest.raises(popart.popart_runtime_error, match=r"sizes \(in bytes\) of src \(48\)"):
        session.readWeights(popart.PyWeightsIO({w: target}))


def test_read_weights_of_a_dtype_the_original_has_no_type_for():
    # np_utils.cpp, getTensorInfo: float64 is not in initNpTypeMap.
    session, w = _session()
    with pytest.raises(popart.popart_exception, match="No numpy type float64 registered"):
        session.readWeights(popart.PyWeightsIO({w: np.zeros((4, 3))}))


def test_read_weights_ignores_unknown_ids_and_constant_weights():
    session, w = _session()
    other = np.full(3, 5.0, np.float64)  # not even checked: no tensor reads it
    session.readWeights(popart.PyWeightsIO({"nope": other}))
    np.testing.assert_array_equal(other, 5.0)
    # With constantWeights an inference session's weights are constants (ir.cpp, addInitializer):
    # readWeights has no variable to read, and the array stays as it was.
    constant, w = _session(constant_weights=True)
    target = np.full((4, 3), 7.0, np.float32)
    constant.readWeights(popart.PyWeightsIO({w: target}))
    np.testing.assert_array_equal(target, 7.0)


# -- writeWeights: the shape (verifyMutableVoidInfo, tensor.cpp:1229), then the byte count ------
# (TensorData::resetData, tensordata.cpp)


def test_write_weights_of_another_shape_is_an_internal_error():
    session, w = _session()
    with pytest.raises(
        popart.popart_internal_exception,
        match=r"does not not match the expected write region of this tensor\. "
        r"Tensor Write \(2\): \[4 3\] != MutableVoidData \(2\): \[2 6\]",
    ):
        session.writeWeights(popart.PyWeightsIO({w: np.zeros((2, 6), np.float32)}))


def test_write_weights_of_another_dtype_size_is_refused_and_of_the_same_size_taken_bitwise():
    session, w = _session()
    with pytest.raises(
        popart.popart_exception, match="cannot reset tensor data with data of non-matching size"
    ):
        session.writeWeights(popart.PyWeightsIO({w: np.zeros((4, 3), np.float16)}))
    with pytest.raises(popart.popart_exception, match="No numpy type float64 registered"):
        session.writeWeights(popart.PyWeightsIO({w: np.zeros((4, 3))}))
    # int32 has float32's size: its bytes are taken as they are (memcpy).
    bits = np.full((4, 3), 1.5, np.float32).view(np.int32)
    session.writeWeights(popart.PyWeightsIO({w: bits}))
    session.weightsFromHost()
    session.weightsToHost()
    target = np.zeros((4, 3), np.float32)
    session.readWeights(popart.PyWeightsIO({w: target}))
    np.testing.assert_array_equal(target, 1.5)


def test_write_weights_ignores_unknown_ids():
    session, w = _session()
    session.writeWeights(popart.PyWeightsIO({"nope": np.zeros(7, np.float64)}))


def test_py_weights_io_takes_a_dict_of_numpy_arrays():
    # popart.cpp binds PyWeightsIO(weights: Dict[str, numpy.ndarray]) only.
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        popart.PyWeightsIO({"w": [1.0, 2.0]})
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        popart.PyWeightsIO({1: np.zeros(2, np.float32)})
    popart.PyWeightsIO(weights={"w": np.zeros(2, np.float32)})
    with pytest.raises(popart.popart_exception, match="not c-contiguous"):
        popart.PyWeightsIO({"w": np.zeros((4, 4), np.float32)[:, ::2]})


# -- VariableSettings: the constructors popart.cpp binds ----------------------------------------


def test_variable_settings_constructors():
    mode = popart.VariableRetrievalMode.AllReplicas
    group = popart.CommGroup(popart.CommGroupType.Consecutive, 2)
    assert popart.VariableSettings().getRetrievalMode() == popart.VariableRetrievalMode.OnePerGroup
    assert popart.VariableSettings(group).getGroupSize() == 2
    assert popart.VariableSettings(mode).getRetrievalMode() == mode
    settings = popart.VariableSettings(sharedVariableDomain_=group, retrievalMode_=mode)
    assert settings.numReplicasReturningVariable(4) == 4
    strided = popart.VariableSettings(stride=2, groupSize=2, mode=mode)
    assert not strided.isUsingCommGroup()
    assert strided.getStride() == 2
    assert strided.groups(4) == [[0, 2], [1, 3]]
    # verify(): a group of one replica has stride 1 (variablesettings.cpp).
    assert popart.VariableSettings(3, 1, mode).getStride() == 1


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((1, 2), {}),  # no (stride, groupSize) overload in Python
        ((-1, 2, popart.VariableRetrievalMode.OnePerGroup), {}),  # unsigned
        ((1.0, 2, popart.VariableRetrievalMode.OnePerGroup), {}),
        ((0,), {}),  # an int is not a VariableRetrievalMode
        ((), {"retrievalMode": popart.VariableRetrievalMode.AllReplicas}),  # it is retrievalMode_
        (("All",), {}),
    ],
)
def test_variable_settings_refused_arguments_are_type_errors(args, kwargs):
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        popart.VariableSettings(*args, **kwargs)


def test_variable_settings_verify_in_the_constructor():
    mode = popart.VariableRetrievalMode.OnePerGroup
    with pytest.raises(popart.popart_exception, match=r"Check stride != 0 has failed\."):
        popart.VariableSettings(0, 2, mode)
    with pytest.raises(popart.popart_exception, match=r"Check groupSize != 0 has failed\."):
        popart.VariableSettings(2, 0, mode)
    with pytest.raises(popart.popart_internal_exception, match="VariableSettings had 1 errors!"):
        popart.VariableSettings(popart.CommGroup(popart.CommGroupType.Consecutive, 0))
    strided = popart.VariableSettings(1, 2, mode)
    # getSharedVariableDomain is a POPART_CHECK(useCommGroup): a popart::error.
    with pytest.raises(popart.popart_exception, match="Check useCommGroup has failed"):
        strided.getSharedVariableDomain()


# -- loadExecutable: the binding's type check comes first -----------------------------------


def test_load_executable_type_error_before_any_state_check(tmp_path):
    session, _ = _session()  # prepared already
    with pytest.raises(TypeError, match=r"loadExecutable\(\): incompatible function arguments"):
        session.loadExecutable(5)
    with pytest.raises(TypeError):
        session.loadExecutable(tmp_path)  # a path object: std::string takes str and bytes only
    # Session::loadExecutableFromFile (session.cpp): a file that cannot be opened.
    with pytest.raises(popart.popart_exception, match="Could not open file"):
        session.loadExecutable(filename=str(tmp_path / "missing.popef"))
