"""graphcore/popart tests/integration/external_tensorproto_data_test.py: initializers saved
in an external data file (by the GraphTransformer or the Builder: their bytes back to back, at
the location as given, relative to the working directory), the original's refusals, a model
with external tensors loaded into a session, modelToHost writing trained weights and the
optimizer state of such weights back to the external file (without corrupting it, and never
to a file it did not create), and moving the data with updateExternallySavedTensorLocations."""

import os

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_save_tensors_externally")
def test_save_tensors_externally(tmp_path):
    d1 = np.array([1]).astype(np.float32)
    d2 = np.array([7, 4]).astype(np.float16)
    builder = popart.Builder()
    i1, i2 = builder.addInitializedInputTensor(d1), builder.addInitializedInputTensor(d2)
    builder.aiOnnx.add([i1, i2])

    def check(path):
        assert os.path.getsize(path) == 4 + 2 * 2
        np.testing.assert_array_equal(np.fromfile(path, np.float32, count=1), d1)
        np.testing.assert_array_equal(np.fromfile(path, np.float16, count=2, offset=4), d2)

    transformer = popart.GraphTransformer(builder.getModelProto())
    transformer.saveInitializersExternally([i1, i2], str(tmp_path / "model_tensors0.onnx"))
    check(tmp_path / "model_tensors0.onnx")
    builder.saveInitializersExternally([i1, i2], str(tmp_path / "model_tensors1.onnx"))
    check(tmp_path / "model_tensors1.onnx")


@pytest.mark.follows("test_try_save_externally_when_already_external")
def test_try_save_externally_when_already_external(tmp_path):
    builder = popart.Builder()
    i1 = builder.addInitializedInputTensor(np.ones([10], dtype=np.float32))
    path = str(tmp_path / "model_tensors.onnx")
    builder.saveInitializersExternally([i1], path)
    with pytest.raises(popart.popart_exception) as error:
        builder.saveInitializersExternally([i1], path)
    assert "already has an external data_location" in error.value.args[0]


@pytest.mark.follows("test_try_save_non_initializer_externally")
def test_try_save_non_initializer_externally(tmp_path):
    builder = popart.Builder()
    c = builder.aiOnnx.constant(np.array([1, 6], dtype=np.float32))
    with pytest.raises(popart.popart_exception) as error:
        builder.saveInitializersExternally([c], str(tmp_path / "model_tensors.onnx"))
    assert "is not an initializer" in error.value.args[0]


@pytest.mark.follows("test_load_externally_saved_tensors")
def test_load_externally_saved_tensors(tmp_path):
    d1 = np.array([1, -1, 6]).astype(np.float32)
    d2 = np.array([-8, 7, 4]).astype(np.float32)
    builder = popart.Builder()
    i1, i2 = builder.addInitializedInputTensor(d1), builder.addInitializedInputTensor(d2)
    o = builder.aiOnnx.add([i1, i2])
    builder.saveInitializersExternally([i1, i2], str(tmp_path / "tensors.onnx"))
    builder.saveModelProto(str(tmp_path / "model.onnx"))
    loaded = popart.Builder(str(tmp_path / "model.onnx"))
    session = popart.InferenceSession(
        fnModel=loaded.getModelProto(),
        dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    session.run(popart.PyStepIO({}, anchors))
    np.testing.assert_array_equal(anchors[o], d1 + d2)


@pytest.mark.follows("test_overwriting_external_data_file")
def test_overwriting_external_data_file(tmp_path):
    builder = popart.Builder()
    d1 = np.random.default_rng(0).random((3, 3)).astype(np.float32)
    i1 = builder.addInitializedInputTensor(d1)
    loss = builder.aiGraphcore.identityloss([builder.aiOnnx.matmul([i1, i1])])
    tensors = str(tmp_path / "model_tensors0.onnx")
    builder.saveInitializersExternally([i1], tensors)
    session = popart.TrainingSession(
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        fnModel=builder.getModelProto(),
        loss=loss,
        optimizer=popart.SGD({"defaultLearningRate": (0.2, True), "defaultMomentum": (0.5, True)}),
        dataFlow=popart.DataFlow(1, []),
    )
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO({}, session.initAnchorArrays()))
    session.modelToHost(str(tmp_path / "model0.onnx"))
    first = np.fromfile(tensors, dtype=np.float32)
    session.modelToHost(str(tmp_path / "model0.onnx"))
    np.testing.assert_array_equal(np.fromfile(tensors, dtype=np.float32), first)


@pytest.mark.follows("test_save_back_externally_saved_tensors")
def test_save_back_externally_saved_tensors(tmp_path):
    builder = popart.Builder()
    d1 = np.random.default_rng(1).random((3, 3)).astype(np.float32)
    i1 = builder.addInitializedInputTensor(d1)
    loss = builder.aiGraphcore.identityloss([builder.aiOnnx.matmul([i1, i1])])
    tensors = str(tmp_path / "model_tensors.onnx")
    builder.saveInitializersExternally([i1], tensors)
    session = popart.TrainingSession(
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        fnModel=builder.getModelProto(),
        loss=loss,
        optimizer=popart.ConstSGD(0.1),
        dataFlow=popart.DataFlow(1, []),
    )
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO({}, session.initAnchorArrays()))
    session.modelToHost(str(tmp_path / "model.onnx"))
    # One SGD step of the mean of d1 @ d1 (identityloss reduces by Mean by default): the
    # gradient is (1 @ d1.T + d1.T @ 1) / 9.
    ones = np.ones((3, 3), np.float32) / 9
    expected = d1 - 0.1 * (ones @ d1.T + d1.T @ ones)
    np.testing.assert_allclose(np.fromfile(tensors, np.float32).reshape(3, 3), expected, rtol=1e-5)


def _momentum_sgd():
    return popart.SGD({"defaultLearningRate": (0.2, True), "defaultMomentum": (0.5, True)})


# The optimizer, and the prefixes of the state it keeps per weight, as the original lists.
OPTIMIZER_STATES = [
    pytest.param(_momentum_sgd, [popart.reservedAcclPrefix()], id="sgd_momentum"),
    pytest.param(
        lambda: popart.Adam(
            {
                "defaultLearningRate": (0.2, True),
                "defaultBeta1": (0.1, True),
                "defaultBeta2": (0.1, True),
                "defaultWeightDecay": (0.5, True),
                "defaultEps": (1e-5, True),
                "lossScaling": (2, True),
            }
        ),
        [popart.reservedAccl1Prefix(), popart.reservedAccl2Prefix(), popart.reservedStepPrefix()],
        id="adam",
    ),
    pytest.param(
        lambda: popart.Adaptive(
            {"defaultLearningRate": (0.2, True)}, mode=popart.AdaptiveMode.CenteredRMSProp
        ),
        [popart.reservedAccl1Prefix(), popart.reservedAccl2Prefix()],
        id="centered_rmsprop",
    ),
]


@pytest.mark.follows("test_save_tensors_optimizer_state_externally")
@pytest.mark.parametrize("make_optimizer, prefixes", OPTIMIZER_STATES)
def test_save_tensors_optimizer_state_externally(tmp_path, make_optimizer, prefixes):
    rng = np.random.default_rng(2)
    d1, d2 = rng.random((3, 3)).astype(np.float32), rng.random(3).astype(np.float32)
    builder = popart.Builder()
    i1, i2 = builder.addInitializedInputTensor(d1), builder.addInitializedInputTensor(d2)
    o = builder.aiOnnx.matmul([i1, i2])
    loss = builder.aiGraphcore.identityloss([o])
    tensors = str(tmp_path / "model_tensors.onnx")
    builder.saveInitializersExternally([i1, i2], tensors)
    assert os.path.getsize(tensors) == (d1.size + d2.size) * 4
    anchor_ids = [o, popart.reservedGradientPrefix() + i1, popart.reservedGradientPrefix() + i2]

    def session_of(model):
        session = popart.TrainingSession(
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            fnModel=model,
            loss=loss,
            optimizer=make_optimizer(),
            dataFlow=popart.DataFlow(1, anchor_ids),
        )
        session.prepareDevice()
        session.weightsFromHost()
        return session, session.initAnchorArrays()

    session, anchors = session_of(builder.getModelProto())
    session.run(popart.PyStepIO({}, anchors))
    session.weightsToHost()
    sizes = {i1: d1.size, i2: d2.size}
    values = {w: np.empty(sizes[w], np.float32) for w in (i1, i2)}
    for prefix in prefixes:
        for w in (i1, i2):
            step = prefix == popart.reservedStepPrefix()
            values[prefix + w] = np.empty(1 if step else sizes[w], np.float32)
    session.readWeights(popart.PyWeightsIO(values))
    model_file = str(tmp_path / "model.onnx")
    session.modelToHost(model_file)

    # The optimizer state of externally saved weights goes to the same file, after them, in
    # the order of the prefixes (willow/src/ir.cpp, addAdditionalModelProtoTensors).
    np.testing.assert_array_equal(
        np.fromfile(tensors, np.float32), np.concatenate([v.ravel() for v in values.values()])
    )
    restored, restored_anchors = session_of(model_file)
    restored.run(popart.PyStepIO({}, restored_anchors))
    session.run(popart.PyStepIO({}, anchors))
    for anchor in anchor_ids:
        np.testing.assert_allclose(restored_anchors[anchor], anchors[anchor], rtol=1e-6)


@pytest.mark.follows("test_external_location_relative_path")
def test_external_location_relative_path(tmp_path, monkeypatch):
    builder = popart.Builder()
    i1 = builder.addInitializedInputTensor(np.array([7, 4]).astype(np.float16))
    builder.aiOnnx.add([i1, i1])
    monkeypatch.chdir(tmp_path)
    builder.saveInitializersExternally([i1], "model_tensors.onnx")
    assert (tmp_path / "model_tensors.onnx").exists()
    builder.saveModelProto("model.onnx")
    popart.Builder("model.onnx")  # the location, relative to the working directory, exists
    (tmp_path / "dummy_dir").mkdir()
    monkeypatch.chdir(tmp_path / "dummy_dir")
    with pytest.raises(RuntimeError) as error:
        popart.Builder("../model.onnx")
    assert "model_tensors.onnx, but it doesn't exist or is not accessible" in error.value.args[0]


@pytest.mark.follows("test_external_location_path_does_not_exist")
def test_external_location_path_does_not_exist(tmp_path):
    builder = popart.Builder()
    i1 = builder.addInitializedInputTensor(np.array([-1, 6]).astype(np.float32))
    builder.aiOnnx.add([i1, i1])
    with pytest.raises(popart.popart_exception) as error:
        builder.saveInitializersExternally([i1], str(tmp_path / "dummy" / "tensors.onnx"))
    assert "parent directory does not exist" in error.value.args[0]


@pytest.mark.follows("test_checkpointing_with_externally_stored_tensor_data0")
def test_checkpointing_with_externally_stored_tensor_data0(tmp_path, monkeypatch):
    builder = popart.Builder()
    i1 = builder.addInitializedInputTensor(np.array([1, -1]).astype(np.float32))
    o = builder.aiOnnx.add([i1, i1])
    monkeypatch.chdir(tmp_path)
    builder.saveInitializersExternally([i1], "tensors.onnx")
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, [o]),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    session.run(popart.PyStepIO({}, anchors))
    (tmp_path / "checkpoint0").mkdir()
    monkeypatch.chdir(tmp_path / "checkpoint0")
    # The location is relative to the working directory, where it does not exist: modelToHost
    # does not create a new external data file (only updateExternallySavedTensorLocations
    # moves one).
    with pytest.raises(popart.popart_exception) as error:
        session.modelToHost("model.onnx")
    assert "Unrecognised file name 'tensors.onnx" in error.value.args[0]
    assert not os.path.exists("tensors.onnx")


def _matmul_training_session(tmp_path):
    builder = popart.Builder()
    i1 = builder.addInitializedInputTensor(
        np.random.default_rng(3).random((3, 3)).astype(np.float32)
    )
    loss = builder.aiGraphcore.identityloss([builder.aiOnnx.matmul([i1, i1])])
    tensors = str(tmp_path / "model_tensors0.onnx")
    builder.saveInitializersExternally([i1], tensors)
    session = popart.TrainingSession(
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        fnModel=builder.getModelProto(),
        loss=loss,
        optimizer=_momentum_sgd(),
        dataFlow=popart.DataFlow(1, []),
    )
    return session, tensors


@pytest.mark.follows("test_checkpointing_with_externally_stored_tensor_data1")
def test_checkpointing_with_externally_stored_tensor_data1(tmp_path):
    session, tensors0 = _matmul_training_session(tmp_path)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({}, anchors))
    session.modelToHost(str(tmp_path / "model0.onnx"))
    weights0 = np.fromfile(tensors0, np.float32)
    # Without a location update, modelToHost overwrites the same external file.
    session.run(popart.PyStepIO({}, anchors))
    session.modelToHost(str(tmp_path / "model0.onnx"))
    weights1 = np.fromfile(tensors0, np.float32)
    assert not np.array_equal(weights0, weights1)
    # Moved without a run: the new file holds the same data.
    tensors1 = str(tmp_path / "model_tensors1.onnx")
    session.updateExternallySavedTensorLocations(tensors0, tensors1)
    assert os.path.exists(tensors1)
    session.modelToHost(str(tmp_path / "model1.onnx"))
    np.testing.assert_array_equal(np.fromfile(tensors1, np.float32), weights1)
    # Moved after a run: the new file holds the trained data.
    session.run(popart.PyStepIO({}, anchors))
    tensors2 = str(tmp_path / "model_tensors2.onnx")
    session.updateExternallySavedTensorLocations(tensors1, tensors2)
    assert os.path.exists(tensors2)
    session.modelToHost(str(tmp_path / "model2.onnx"))
    assert not np.array_equal(np.fromfile(tensors2, np.float32), weights1)


@pytest.mark.follows("test_invalid_tensor_location_updates")
def test_invalid_tensor_location_updates(tmp_path):
    session, original = _matmul_training_session(tmp_path)
    updated0 = str(tmp_path / "model_tensors1.onnx")
    fake = str(tmp_path / "foo.bar")
    with pytest.raises(popart.popart_exception) as error:
        session.updateExternallySavedTensorLocations(fake, updated0)
    assert "but file '" + fake + "' does not exist" in error.value.args[0]
    session.updateExternallySavedTensorLocations(original, updated0)
    with pytest.raises(popart.popart_exception) as error:
        session.updateExternallySavedTensorLocations(
            original, str(tmp_path / "model_tensors2.onnx")
        )
    assert "No ONNX model initializers have external location set to" in error.value.args[0]
