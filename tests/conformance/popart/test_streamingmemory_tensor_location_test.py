"""graphcore/popart tests/integration/streamingmemory_tests/streamingmemory_tensor_location_test.py:
weights, activations and SGD1 accumulators put on or off chip by the tensor location
settings and their per-tensor overrides, checked in the serialized IR (an off-chip tensor is
loaded through a `RemoteArg___<id>` tensor). openipu decides the same locations
(`session/tensor_locations.py`, tested in tests/popart) and trains these models, but has no
PopART IR to serialize (`Session._serializeIr`), so these are expected failures. The
original runs them on IPU hardware."""

import numpy as np
import pytest

import popart

NO_IR = "openipu has no PopART IR to serialize (Session._serializeIr)"
OFF, ON = popart.TensorStorage.OffChip, popart.TensorStorage.OnChip


def _serialized_ir(layers=3, optimizer=None, override=None, **settings):
    rng = np.random.default_rng(10911)
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 8, 8]))
    out = x
    for layer in range(layers):
        with builder.executionPhase(layer):
            w = builder.addInitializedInputTensor(
                rng.random((8, 8)).astype(np.float32), f"W{layer}"
            )
            out = builder.aiOnnx.matmul([out, w])
    loss = builder.aiGraphcore.l1loss([out], 0.1)
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 2
    for kind, storage in settings.items():
        setattr(opts, f"{kind}TensorLocationSettings", popart.TensorLocationSettings(storage, 0))
    opts.tensorLocationSettingsOverride = override or {}
    opts.executionPhaseSettings.phases = layers
    opts.autoRecomputation = popart.RecomputationType.NoRecompute
    opts.virtualGraphMode = popart.VirtualGraphMode.ExecutionPhases
    opts.explicitRecomputation = False
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, {}),
        optimizer=optimizer or popart.SGD({"defaultLearningRate": (0.5, False)}),
        loss=loss,
        patterns=popart.Patterns(popart.PatternsLevel.All),
        userOptions=opts,
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2, "tilesPerIPU": 4}),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    data = rng.random((2, 1, 8, 8)).astype(np.float32)
    session.run(popart.PyStepIO({x: data}, anchors))
    return session._serializeIr(popart.IrSerializationFormat.JSON)


SGD1 = dict(
    defaultLearningRate=(0.1, True), defaultMomentum=(0.0, False),
    defaultWeightDecay=(0.0, False), defaultDampening=(0.0, True),
)  # fmt: skip


@pytest.mark.follows("test_weight_tensor_location_settings")
@pytest.mark.xfail(strict=True, raises=AttributeError, reason=NO_IR)
def test_weight_tensor_location_settings():
    _serialized_ir(weight=OFF)


@pytest.mark.follows("test_weight_tensor_location_settings_plus_override")
@pytest.mark.xfail(strict=True, raises=AttributeError, reason=NO_IR)
def test_weight_tensor_location_settings_plus_override():
    _serialized_ir(weight=OFF, override={"W2": popart.TensorLocation(ON)})


@pytest.mark.follows("test_activation_tensor_location_settings")
@pytest.mark.xfail(strict=True, raises=AttributeError, reason=NO_IR)
def test_activation_tensor_location_settings():
    _serialized_ir(layers=5, activation=OFF)


@pytest.mark.follows("test_activation_tensor_location_settings_plus_override")
@pytest.mark.xfail(strict=True, raises=AttributeError, reason=NO_IR)
def test_activation_tensor_location_settings_plus_override():
    _serialized_ir(layers=5, activation=OFF, override={"MatMul:0/1__t6": popart.TensorLocation(ON)})


@pytest.mark.follows("test_accumulator_tensor_location_settings")
@pytest.mark.xfail(strict=True, raises=AttributeError, reason=NO_IR)
def test_accumulator_tensor_location_settings():
    _serialized_ir(optimizer=popart.SGD(SGD1), accumulator=OFF)


@pytest.mark.follows("test_accumulator_tensor_location_settings_plus_override")
@pytest.mark.xfail(strict=True, raises=AttributeError, reason=NO_IR)
def test_accumulator_tensor_location_settings_plus_override():
    _serialized_ir(
        optimizer=popart.SGD(SGD1), accumulator=OFF,
        override={"Accl___W1": popart.TensorLocation(ON)},
    )  # fmt: skip
