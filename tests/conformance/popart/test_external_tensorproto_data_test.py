"""graphcore/popart tests/integration/external_tensorproto_data_test.py: initializers saved
in an external data file (by the GraphTransformer or the Builder, at an absolute location:
their bytes back to back), the original's refusals (a tensor already external, a tensor
that is no initializer), a model with external tensors loaded into a session, and modelToHost
writing the external file again without corrupting it. The original's remaining scenarios
(writing trained weights and optimizer state back to external files, relative locations,
checkpointing, updateExternallySavedTensorLocations) are not ported yet."""

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
