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


# -- VariableSettings' methods: popart.cpp:3404-3423 binds them without py::arg (positional
# only, shown as arg0...) but getGroupRepresentative(group), and with no defaults.


def _grouped_settings():
    return popart.VariableSettings(popart.CommGroup(popart.CommGroupType.Consecutive, 2))


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.getGroupCount(numReplicas=4),
        lambda s: s.getGroupCount(replicaCount=4),
        lambda s: s.getGroupCount(arg0=4),
        lambda s: s.numReplicasReturningVariable(replicaCount=4),
        lambda s: s.getRealGroupSize(replicaCount=4),
        lambda s: s.getReplicaGrouping(numReplicas=4),
        lambda s: s.groups(replicaCount=4),
        lambda s: s.shapeOnHost([3], replicaCount=4),
        lambda s: s.shapeOnReplica([2, 3], 4, name="w"),
        lambda s: s.shapeOnReplica(full_shape=[2, 3], replicaCount=4, name="w"),
    ],
)
def test_variable_settings_methods_take_no_keywords(call):
    with pytest.raises(TypeError, match=r"\(\): incompatible function arguments"):
        call(_grouped_settings())


def test_variable_settings_shape_on_replica_needs_its_name():
    settings = _grouped_settings()
    with pytest.raises(TypeError, match=r"^shapeOnReplica\(\): incompatible function") as raised:
        settings.shapeOnReplica([2, 3], 4)
    assert (
        "(self: popart_core.VariableSettings, arg0: List[int], arg1: int, arg2: str) -> "
        "List[int]" in str(raised.value)
    )
    assert settings.shapeOnReplica([2, 3], 4, "w") == [3]
    assert settings.shapeOnReplica((2, 3), 4, "w") == [3]  # any sequence, as List[int] takes


def test_variable_settings_methods_positional_and_their_types():
    settings = _grouped_settings()
    assert settings.getGroupCount(4) == 2
    assert settings.numReplicasReturningVariable(4) == 2
    assert settings.getRealGroupSize(4) == 2
    assert settings.groups(4) == [[0, 1], [2, 3]]
    assert settings.shapeOnHost([3], 4) == [2, 3]
    assert settings.getReplicaGrouping(4).getNumGroups() == 2
    # getGroupRepresentative is the one bound with a name (py::arg("group")).
    assert settings.getGroupRepresentative(group=1) == 2
    assert settings.getGroupRepresentative(1) == 2
    with pytest.raises(TypeError, match=r"^getGroupCount\(\): incompatible function"):
        settings.getGroupCount(-1)  # unsigned
    with pytest.raises(TypeError, match=r"^getGroupCount\(\): incompatible function"):
        settings.getGroupCount(4.0)
    with pytest.raises(TypeError, match=r"^getGroupCount\(\): incompatible function"):
        settings.getGroupCount()
    with pytest.raises(TypeError, match=r"^getGroupRepresentative\(\): incompatible"):
        settings.getGroupRepresentative(index=1)


@pytest.mark.parametrize(
    "method",
    [
        "getSharedVariableDomain",
        "getRetrievalMode",
        "getCommGroupType",
        "getGroupSize",
        "getStride",
        "isUsingCommGroup",
        "verify",
    ],
)
def test_variable_settings_methods_without_arguments_refuse_some(method):
    settings = _grouped_settings()
    getattr(settings, method)()
    with pytest.raises(TypeError, match=rf"^{method}\(\): incompatible function arguments"):
        getattr(settings, method)(4)


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


# -- SessionOptions.enableVariablesCaching (sessionoptions.hpp: default true) ----------------
# With it off, a variable of which the host reads one copy per group has no device-to-host
# buffer of its own (devicex.cpp:1910-1940, needsIntermediaryD2hWeightBuffer): readWeights
# copies from the IR's tensor data (getD2hWeightData, devicex.cpp:1962), which the
# WeightsToHost program writes into. With it on, readWeights copies from a buffer that only
# weightsToHost fills (zeros until then).

LR = 0.01
X = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4)


def _training_session(caching, replicas=1, w_settings=None):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    if w_settings is None:
        w = builder.addInitializedInputTensor(W, "w")
    else:
        w = builder.addInitializedInputTensor(W, w_settings, "w")
    loss = builder.aiOnnx.reducesumsquare([builder.aiOnnx.matmul([x, w])], keepdims=0)
    options = popart.SessionOptions()
    options.enableVariablesCaching = caching
    if replicas > 1:
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = replicas
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [loss]),
        loss=loss,
        optimizer=popart.ConstSGD(LR),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": replicas}),
        userOptions=options,
    )
    return session, x, w


def _sgd_steps(w, steps, replicas=1):
    """numpy: loss = sum((x @ w)^2) per replica, gradients summed over the replicas."""
    w = w.astype(np.float64)
    for _ in range(steps):
        w = w - LR * replicas * (X.T @ (2 * (X @ w)))
    return w


def _train(session, x, steps=1, replicas=1):
    anchors = session.initAnchorArrays()
    feed = np.broadcast_to(X, (replicas, 2, 4)).copy() if replicas > 1 else X
    for _ in range(steps):
        session.run(popart.PyStepIO({x: feed}, anchors))


def _read(session, w, shape=(4, 3)):
    target = np.full(shape, -1.0, np.float32)
    session.readWeights(popart.PyWeightsIO({w: target}))
    return target


def test_variables_caching_is_on_by_default():
    assert popart.SessionOptions().enableVariablesCaching is True


@pytest.mark.parametrize("caching", [True, False])
def test_read_weights_before_and_after_weights_to_host(caching):
    session, x, w = _training_session(caching)
    session.prepareDevice()
    session.weightsFromHost()
    _train(session, x)
    # Before weightsToHost: the buffer's zeros (caching on) or the host copy, still the
    # initial value (caching off).
    np.testing.assert_array_equal(_read(session, w), W if not caching else np.zeros_like(W))
    session.weightsToHost()
    np.testing.assert_allclose(_read(session, w), _sgd_steps(W, 1), rtol=1e-5)


@pytest.mark.parametrize("caching", [True, False])
def test_weights_from_host_after_weights_to_host(caching):
    # Caching off: weightsToHost wrote the trained value into the host copy, which
    # weightsFromHost sends back. Caching on: the host copy is still the initial value.
    session, x, w = _training_session(caching)
    session.prepareDevice()
    session.weightsFromHost()
    _train(session, x, steps=2)
    session.weightsToHost()
    session.weightsFromHost()
    _train(session, x)
    session.weightsToHost()
    expected = _sgd_steps(W, 3) if not caching else _sgd_steps(W, 1)
    np.testing.assert_allclose(_read(session, w), expected, rtol=1e-5)


@pytest.mark.parametrize("caching", [True, False])
def test_read_weights_after_write_weights(caching):
    session, x, w = _training_session(caching)
    session.prepareDevice()
    written = np.full((4, 3), 0.5, np.float32)
    session.writeWeights(popart.PyWeightsIO({w: written}))
    # Caching off: writeWeights resets the tensor data readWeights copies from.
    expected = written if not caching else np.zeros_like(W)
    np.testing.assert_array_equal(_read(session, w), expected)
    session.weightsFromHost()
    _train(session, x)
    session.weightsToHost()
    np.testing.assert_allclose(_read(session, w), _sgd_steps(written, 1), rtol=1e-5)


def test_read_weights_without_caching_of_an_inference_session():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    w = builder.addInitializedInputTensor(W, "w")
    y = builder.aiOnnx.matmul([x, w])
    options = popart.SessionOptions()
    options.constantWeights = False
    options.enableVariablesCaching = False
    session = popart.InferenceSession(
        builder.getModelProto(),
        popart.DataFlow(1, [y]),
        popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options,
    )
    # Session::readWeights needs a device only (session.cpp:526-535), not prepareDevice.
    np.testing.assert_array_equal(_read(session, w), W)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: X}, anchors))
    np.testing.assert_allclose(anchors[y], X @ W, rtol=1e-6)
    session.weightsToHost()
    np.testing.assert_array_equal(_read(session, w), W)


def test_without_caching_all_replicas_copies_keep_their_buffer():
    # One copy per replica of an ungrouped weight: more copies than groups, so the host reads
    # a buffer of its own, zeros before weightsToHost (devicex.cpp:1938-1939).
    settings = popart.VariableSettings(popart.VariableRetrievalMode.AllReplicas)
    session, x, w = _training_session(False, replicas=2, w_settings=settings)
    session.prepareDevice()
    session.weightsFromHost()
    _train(session, x, replicas=2)
    np.testing.assert_array_equal(_read(session, w, (2, 4, 3)), np.zeros((2, 4, 3)))
    session.weightsToHost()
    expected = _sgd_steps(W, 1, replicas=2)
    read = _read(session, w, (2, 4, 3))
    np.testing.assert_allclose(read[0], expected, rtol=1e-5)
    np.testing.assert_allclose(read[1], expected, rtol=1e-5)
    # The host copy did not change: weightsFromHost sends the initial value again.
    session.weightsFromHost()
    _train(session, x, replicas=2)
    session.weightsToHost()
    np.testing.assert_allclose(_read(session, w, (2, 4, 3))[0], expected, rtol=1e-5)


def test_without_caching_grouped_weights_read_the_host_copy():
    # One copy per group (OnePerGroup): no buffer of its own.
    group = popart.CommGroup(popart.CommGroupType.Consecutive, 1)
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    w_host = np.stack([W, -W])
    w = builder.addInitializedInputTensor(w_host, popart.VariableSettings(group), "w")
    loss = builder.aiOnnx.reducesumsquare([builder.aiOnnx.matmul([x, w])], keepdims=0)
    options = popart.SessionOptions()
    options.enableVariablesCaching = False
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = 2
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [loss]),
        loss=loss,
        optimizer=popart.ConstSGD(LR),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    _train(session, x, replicas=2)
    np.testing.assert_array_equal(_read(session, w, (2, 4, 3)), w_host)
    session.weightsToHost()
    expected = np.stack([_sgd_steps(W, 1), _sgd_steps(-W, 1)])
    np.testing.assert_allclose(_read(session, w, (2, 4, 3)), expected, rtol=1e-5)
