"""The documented PopART accessors and session calls that no larger program uses.

Optimizer hyper-parameter maps (the values given, by default and per weight), variable
settings' groups, the session calls of the original's engine life cycle, reports and
executables, the enums and older opsets the spec lists: each answers as the spec says.
"""

from __future__ import annotations

import os

import pytest
from training_helpers import build_regression, regression_data, train_session

import popart


def test_sgd_adam_and_adaptive_report_their_hyper_parameters():
    sgd = popart.SGD(
        {
            "defaultLearningRate": (0.1, False),
            "defaultMomentum": (0.9, True),
            "defaultDampening": (0.2, True),
            "defaultVelocityScaling": (2.0, True),
            "defaultWeightDecay": (0.01, True),
            "lossScaling": (8.0, True),
        }
    )
    assert sgd.momentums().getDefault().val() == pytest.approx(0.9)
    assert sgd.dampenings().getDefault().val() == pytest.approx(0.2)
    assert sgd.velocityScalings().getDefault().val() == pytest.approx(2.0)
    assert sgd.weightDecays().getDefault().val() == pytest.approx(0.01)
    assert sgd.getLossScalingVal() == pytest.approx(8.0)

    adam = popart.Adam(
        {
            "defaultBeta1": (0.8, True),
            "defaultBeta2": (0.99, True),
            "defaultEps": (1e-6, True),
            "defaultWeightDecay": (0.1, True),
        }
    )
    assert adam.beta1s().getDefault().val() == pytest.approx(0.8)
    assert adam.beta2s().getDefault().val() == pytest.approx(0.99)
    assert adam.epss().getDefault().val() == pytest.approx(1e-6)
    assert adam.weightDecays().getDefault().val() == pytest.approx(0.1)

    adaptive = popart.Adaptive(
        {
            "defaultAlpha": (0.95, True),
            "defaultMomentum": (0.5, True),
            "defaultEps": (1e-4, True),
            "defaultWeightDecay": (0.2, True),
        },
        popart.AdaptiveMode.RMSProp,
    )
    assert adaptive.alphas().getDefault().val() == pytest.approx(0.95)
    assert adaptive.momentums().getDefault().val() == pytest.approx(0.5)
    assert adaptive.epss().getDefault().val() == pytest.approx(1e-4)
    assert adaptive.weightDecays().getDefault().val() == pytest.approx(0.2)


def test_optimizer_value_map_holds_a_default_and_weight_values():
    default = popart.OptimizerValue(0.5, True)
    values = popart.OptimizerValueMap(default, {"w": popart.OptimizerValue(0.25, False)})
    assert values.getDefault() == default
    sgd = popart.SGD({"defaultLearningRate": (0.1, True)})
    sgd.insertSpecific("w", {"learningRate": (0.3, True)})
    assert isinstance(sgd.learningRates(), popart.OptimizerValueMap)
    assert sgd.learningRates().getDefault().val() == pytest.approx(0.1)


def test_variable_settings_groups():
    grouped = popart.VariableSettings(popart.CommGroup(popart.CommGroupType.Consecutive, 2))
    assert grouped.getCommGroupType() == popart.CommGroupType.Consecutive
    assert grouped.getGroupSize() == 2
    assert grouped.isUsingCommGroup()
    assert grouped.getRealGroupSize(4) == 2
    assert grouped.getReplicaGrouping(4).getNumGroups() == 2
    everyone = popart.VariableSettings()
    assert everyone.getCommGroupType() == popart.CommGroupType.All
    assert everyone.getRealGroupSize(4) == 4


def test_enums_and_settings_of_the_spec():
    assert {m.name for m in popart.IrSerializationFormat} >= {"JSON"}
    assert {m.name for m in popart.AutodiffStitchStrategy} >= {"SafeAddFwdOutputs"}
    settings = popart.AutodiffSettings()
    settings.stitchStrategy = popart.AutodiffStitchStrategy.SafeAddFwdOutputs
    assert settings.stitchStrategy == popart.AutodiffStitchStrategy.SafeAddFwdOutputs


def test_older_onnx_opsets_and_the_builder_core():
    for version, opset in (
        (6, popart.builder.AiOnnx6),
        (7, popart.builder.AiOnnx7),
        (8, popart.builder.AiOnnx8),
    ):
        builder = popart.Builder(opsets={"ai.onnx": version, "ai.graphcore": 1})
        ops = opset(builder)
        x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2]))
        y = ops.add([x, x])
        assert builder.getTensorShape(y) == [2]
    core = popart.builder._BuilderCore()
    assert core.getInputTensorIds() == []


def _trained_session(tmp_path=None, options=None):
    model = build_regression()
    x, t = regression_data(2)
    session, _, _ = train_session(
        model, popart.SGD({"defaultLearningRate": (0.1, True)}), x, t, 1, options=options
    )
    return session


def test_session_engine_life_cycle_calls():
    model = build_regression()
    session = popart.TrainingSession(
        model.proto,
        popart.DataFlow(1, {}),
        model.loss,
        popart.SGD({"defaultLearningRate": (0.1, True)}),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    with pytest.raises(popart.popart_exception, match="no compiled engine"):
        session.loadEngineAndConnectStreams()
    session.prepareDevice()
    session.loadEngineAndConnectStreams()
    session.setEngineIsLoaded(True)
    session.updateEngineCache()
    inference = popart.InferenceSession(
        model.proto,
        popart.DataFlow(1, {model.loss: popart.AnchorReturnType("All")}),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    inference.checkInplacingAmbiguity()
    inference.prepareDevice()
    inference.loadEngineAndConnectStreams()
    inference.setEngineIsLoaded(False)


def test_reports_and_cycle_counts():
    options = popart.SessionOptions()
    options.instrumentWithHardwareCycleCounter = True
    session = _trained_session(options=options)
    # The cost model's estimate of the last run's cycles, and its figures in the reports.
    assert isinstance(session.getCycleCount(), int) and session.getCycleCount() > 0
    assert session.getReport() is not None
    assert "Cost model:" in session.getSummaryReport()


def test_save_executable_and_move_external_tensors(tmp_path):
    session = _trained_session()
    path = str(tmp_path / "training.popef")
    session.saveExecutable(path)
    assert os.path.getsize(path) > 0
    with pytest.raises(popart.popart_exception, match="but file 'nowhere.bin' does not exist"):
        session.updateExternallySavedTensorLocations("nowhere.bin", "elsewhere.bin")


def test_device_try_attach_until_timeout():
    manager = popart.DeviceManager()
    manager.setOnDemandAttachTimeout(1)
    device = manager.acquireAvailableDevice(1, connectionType=popart.DeviceConnectionType.OnDemand)
    assert isinstance(device, popart.DeviceInfo)
    assert device.tryAttachUntilTimeout()
    device.detach()
