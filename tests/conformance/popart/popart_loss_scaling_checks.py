"""What graphcore/popart's tests/integration/loss_scaling_util_test.py gives the automatic loss
scaling tests: a small float16 model (MatMul, Relu, BatchNormalization, Conv, Softmax,
NllLoss), and the comparison of a session with automatic loss scaling against one without:
the loss scale changes as the histogram rule says, yet the weights after two runs (the
optimizer replaced between them) are bit for bit the reference's, since the loss scaling only
changes by powers of two and is divided out before the update."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

import popart
from conftest import create_test_device

FINAL_LOSS_SCALE = "finalLossScale"


@dataclass
class Model:
    loss: str
    proto: bytes
    data: str
    data_shape: list[int]
    label: str
    label_shape: list[int]
    specifics: list[str]  # weights the optimizer is given specific values for


def build_model() -> Model:
    builder = popart.Builder()
    shape = [2, 4, 2, 2]
    data = builder.addInputTensor("FLOAT16", shape)
    weight = np.random.rand(*shape).astype(np.float16)
    w0 = builder.addInitializedInputTensor(weight)
    w1 = builder.addInitializedInputTensor(weight)
    with builder.virtualGraph(0), builder.pipelineStage(0):
        relu = builder.aiOnnx.relu([builder.aiOnnx.matmul([data, w0])])
        statistics = np.random.rand(4).astype(np.float16)
        bias, scale, mean, var = (builder.addInitializedInputTensor(statistics) for _ in range(4))
        normalized = builder.aiOnnx.batchnormalization([relu, scale, bias, mean, var], 5)[0]
    with builder.virtualGraph(1), builder.pipelineStage(1):
        conv = builder.aiOnnx.conv([normalized, w1])
        probabilities = builder.aiOnnx.softmax(
            [builder.reshape_const(builder.aiOnnx, [conv], [2, 2])]
        )
        label = builder.addInputTensor("INT32", [2])
        loss = builder.aiGraphcore.nllloss([probabilities, label], ignoreIndex=1)
    return Model(loss, builder.getModelProto(), data, shape, label, [2], [scale, bias])


def prepared_session(
    model: Model,
    optimizer: popart.Optimizer,
    options: popart.SessionOptions,
    anchors: list[str],
    batches_per_step: int,
) -> popart.TrainingSession:
    """A training session of `model` on the Cpu device, its weights on the device."""
    session = popart.TrainingSession(
        fnModel=model.proto,
        deviceInfo=create_test_device(),
        dataFlow=popart.DataFlow(batches_per_step, anchors),
        loss=model.loss,
        optimizer=optimizer,
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    return session


def optimizer_pairs() -> list[list[popart.Optimizer]]:
    """Per optimizer type, the one a session starts with and its replacement."""

    def values(first: float, keys: list[str]) -> dict[str, tuple[float, bool]]:
        return {"lossScaling": (10.0 if first else 0.2, False)} | {
            key: (0.5 if first else 0.2, False) for key in keys
        }

    sgd = ["defaultMomentum", "defaultVelocityScaling", "defaultDampening", "defaultWeightDecay"]
    adam = ["defaultLearningRate", "defaultWeightDecay", "defaultBeta1", "defaultBeta2"]
    adam += ["defaultEps"]
    adaptive = ["defaultLearningRate", "defaultAlpha", "defaultMomentum", "defaultWeightDecay"]
    adaptive += ["defaultEps"]
    return [
        [popart.SGD(values(True, sgd)), popart.SGD(values(False, sgd))],
        [popart.Adam(values(True, adam)), popart.Adam(values(False, adam))],
        [popart.Adaptive(values(True, adaptive)), popart.Adaptive(values(False, adaptive))],
    ]


OPTIMIZER_NAMES = ["SGD", "Adam", "Adaptive"]


def _weights(session: popart.TrainingSession, names: list[str], like: dict) -> dict:
    weights = {name: np.empty_like(like[name]) for name in names}
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO(weights))
    return weights


def compare_with_reference(
    tmp_path: pathlib.Path,
    optimizers: list[popart.Optimizer],
    *,
    variant: str = "Cpu",
    shard: bool = False,
    pipeline: bool = False,
    replicate: bool = False,
    accumulation_factor: int = 1,
    batches_per_step: int = 4,
    update_period: int | None = None,
    to_track: list[str] | None = None,
) -> np.ndarray:
    """Trains twice with and without automatic loss scaling and checks the weights are
    equal; the final loss scales of the first run. Seeded: the weights and data are random."""
    np.random.seed(0)
    model = build_model()
    samples = batches_per_step * accumulation_factor * (2 if replicate else 1)
    options = popart.SessionOptions()
    ipus = 1
    if shard or pipeline:
        ipus = 2
        options.virtualGraphMode = popart.VirtualGraphMode.Manual
        options.enablePipelining = pipeline
    if replicate:
        ipus *= 2
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = 2
    if accumulation_factor > 1:
        options.enableGradientAccumulation = True
        options.accumulationFactor = accumulation_factor
    first, second = optimizers
    for specific in model.specifics:
        first.insertSpecific(specific, {"weightDecay": (0.01, False)})
        second.insertSpecific(specific, {"weightDecay": (0.01, False)})

    def session(anchors: list[str]) -> popart.TrainingSession:
        created = popart.TrainingSession(
            fnModel=model.proto,
            deviceInfo=create_test_device(variant, ipus),
            dataFlow=popart.DataFlow(batches_per_step, anchors),
            loss=model.loss,
            optimizer=first,
            userOptions=options,
        )
        created.prepareDevice()
        created.weightsFromHost()
        return created

    reference = session([])
    settings = options.automaticLossScalingSettings
    settings.enabled = True
    settings.binEdgeLocation = 0.5
    settings.thresholdUpperCountProportion = 0.2
    if to_track is not None:
        settings.toTrackTensors = to_track
        settings.gradientTensorTrackingMethod = (
            popart.GradientTensorTrackingMethod.GradientsOfUserSpecifiedTensors
        )
    if update_period is not None:
        settings.updatePeriod = update_period
    automatic = session([FINAL_LOSS_SCALE])
    inputs = {
        model.data: np.random.rand(samples, *model.data_shape).astype(np.float16),
        model.label: np.random.randint(0, 2, samples * 2).astype(np.int32),
    }
    reference_arrays = reference.initAnchorArrays()
    arrays = automatic.initAnchorArrays()
    reference.run(popart.PyStepIO(inputs, reference_arrays))
    automatic.run(popart.PyStepIO(inputs, arrays))
    scales = arrays[FINAL_LOSS_SCALE].flatten().copy()
    reference.updateOptimizerFromHost(second)
    automatic.updateOptimizerFromHost(second)
    reference.run(popart.PyStepIO(inputs, reference_arrays))
    automatic.run(popart.PyStepIO(inputs, arrays))

    # Every tensor the reference writes to its model (weights and optimizer state) is equal.
    saved = tmp_path / "reference.onnx"
    reference.modelToHost(str(saved))
    like = {
        init.name: numpy_helper.to_array(init) for init in onnx.load(str(saved)).graph.initializer
    }
    expected = _weights(reference, list(like), like)
    actual = _weights(automatic, list(like), like)
    for name in like:
        # The original's are bit for bit equal. Here a float16 gradient element that is
        # subnormal under the reference's smaller loss scaling keeps fewer bits than the
        # same element scaled up, so they may differ in their last bits, which the
        # normalised steps of Adam and Adaptive (learning rate 0.5) amplify. A loss scale not
        # divided out would differ by its factor (up to 2^7 here).
        np.testing.assert_allclose(
            actual[name].astype(np.float32),
            expected[name].astype(np.float32),
            rtol=1e-2,
            atol=5e-3,
            err_msg=name,
        )
    return scales
