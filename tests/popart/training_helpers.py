"""A small regression model for training-session tests, and its gradients in numpy.

    y = x @ w + b,   loss = mean((y - t)^2)      (x [4, 3], w [3, 2], b [2], t [4, 2])

Optimizer tests train it with a session and with numpy formulas written from the fact
sheet, over several steps, and compare the weights and the optimizer state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import popart

BATCH, FEATURES, OUTPUTS = 4, 3, 2


@dataclass
class Regression:
    proto: bytes
    x: str
    t: str
    w: str
    b: str
    loss: str
    initial: dict[str, np.ndarray]


def build_regression(
    reduction=popart.ReductionType.Mean, batch: int = BATCH, dtype="FLOAT", onnx_loss=False
):
    """`onnx_loss`: the loss is ai.onnx's ReduceMean, not ai.graphcore's identityloss (so that
    onnxruntime can run the model)."""
    rng = np.random.default_rng(7)
    numpy_type = np.float16 if dtype == "FLOAT16" else np.float32
    initial = {
        "w": rng.normal(size=(FEATURES, OUTPUTS)).astype(numpy_type),
        "b": rng.normal(size=(OUTPUTS,)).astype(numpy_type),
    }
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo(dtype, [batch, FEATURES]), "x")
    t = builder.addInputTensor(popart.TensorInfo(dtype, [batch, OUTPUTS]), "t")
    w = builder.addInitializedInputTensor(initial["w"], "w")
    b = builder.addInitializedInputTensor(initial["b"], "b")
    y = builder.aiOnnx.add([builder.aiOnnx.matmul([x, w]), b])
    difference = builder.aiOnnx.sub([y, t])
    square = builder.aiOnnx.mul([difference, difference])
    if onnx_loss:
        loss = builder.aiOnnx.reducemean([square], keepdims=0)
        builder.addOutputTensor(loss)
    else:
        loss = builder.aiGraphcore.identityloss([square], reduction=reduction)
    return Regression(builder.getModelProto(), x, t, w, b, loss, {w: initial["w"], b: initial["b"]})


def regression_data(steps: int, batch: int = BATCH, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(steps, batch, FEATURES)).astype(np.float32)
    t = rng.normal(size=(steps, batch, OUTPUTS)).astype(np.float32)
    return x, t


def regression_gradients(params, x, t, reduction="Mean"):
    """d loss / d w and d loss / d b (float64) for one batch."""
    w, b = (np.asarray(params[k], np.float64) for k in ("w", "b"))
    y = x.astype(np.float64) @ w + b
    d = 2 * (y - t)
    if reduction == "Mean":
        d /= y.size
    return {"w": x.T.astype(np.float64) @ d, "b": d.sum(axis=0)}


def train_session(
    model: Regression,
    optimizer,
    x,
    t,
    batches_per_step: int,
    options=None,
    anchors=(),
    device=None,
):
    """Trains on x, t ([steps, ...]) in runs of `batches_per_step`; returns the session, the
    final weights and the last run's anchors."""
    art = {name: popart.AnchorReturnType("Final") for name in anchors}
    session = popart.TrainingSession(
        model.proto,
        popart.DataFlow(batches_per_step, art),
        model.loss,
        optimizer,
        device or popart.DeviceManager().createIpuModelDevice({}),
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    per_run = len(x) // batches_per_step
    for run in range(per_run):
        batch = slice(run * batches_per_step, (run + 1) * batches_per_step)
        session.run(popart.PyStepIO({model.x: x[batch], model.t: t[batch]}, arrays))
    return session, read_weights(session, model), arrays


def read_weights(session, model: Regression) -> dict[str, np.ndarray]:
    session.weightsToHost()
    weights = {name: np.zeros_like(value) for name, value in model.initial.items()}
    session.readWeights(popart.PyWeightsIO(weights))
    return weights


def one_training_step(model_proto, loss, feeds, anchor_ids=(), optimizer=None):
    """One SGD step (learning rate 0.1 unless `optimizer`) on a CPU device; returns the
    session and the anchors `anchor_ids` (AnchorReturnType All) of the step."""
    session = popart.TrainingSession(
        fnModel=model_proto,
        dataFlow=popart.DataFlow(1, {name: popart.AnchorReturnType("All") for name in anchor_ids}),
        loss=loss,
        optimizer=optimizer or popart.SGD({"defaultLearningRate": (0.1, False)}),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO(feeds, arrays))
    return session, [arrays[name] for name in anchor_ids]
