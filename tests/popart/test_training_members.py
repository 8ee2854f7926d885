"""A training session's other documented members: its factors, its tensors (the training
tensors included, with their types and shapes), the host shapes of anchors on gradients and
optimizer state with accumulation and replication, broadcastWeights, and the per-replica
values those anchors hold (against numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from training_helpers import build_regression, regression_gradients

import popart

BPS, AF, RF = 2, 2, 2


@pytest.fixture(scope="module")
def trained():
    model = build_regression()
    options = popart.SessionOptions()
    options.enableGradientAccumulation = True
    options.accumulationFactor = AF
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = RF
    grad = popart.reservedGradientPrefix() + model.w
    accl = popart.reservedAcclPrefix() + model.w
    anchors = {
        grad: popart.AnchorReturnType("All"),
        accl: popart.AnchorReturnType("Final"),
        model.loss: popart.AnchorReturnType("Sum"),
    }
    session = popart.TrainingSession(
        model.proto,
        popart.DataFlow(BPS, anchors),
        model.loss,
        popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.5, False)}),
        popart.DeviceManager().createIpuModelDevice({"numIPUs": RF}),
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    rng = np.random.default_rng(8)
    x = rng.normal(size=(BPS, AF, RF, 4, 3)).astype(np.float32)
    t = rng.normal(size=(BPS, AF, RF, 4, 2)).astype(np.float32)
    session.run(popart.PyStepIO({model.x: x, model.t: t}, arrays))
    return model, session, arrays, x, t, grad, accl


def test_factors_and_training_tensors(trained):
    model, session, *_ = trained
    assert (session.accumulationFactor, session.replicationFactor) == (AF, RF)
    ids = session.getTensorIds()
    prefixes = [
        popart.reservedGradientPrefix(),
        popart.reservedUpdatedVarPrefix(),
        popart.reservedAcclPrefix(),
        popart.reservedAccumPrefix(),
    ]
    for prefix in prefixes:
        assert prefix + model.w in ids and prefix + model.b in ids
        info = session.getInfo(prefix + model.b)
        assert (info.data_type(), info.shape()) == ("FLOAT", [2])
    assert "lossScaling_FLOAT" in ids and session.getInfo("lossScaling_FLOAT").shape() == []
    # Plain SGD with momentum keeps one state tensor per weight (no Accl1___ of Adam).
    assert popart.reservedAccl1Prefix() + model.w not in ids
    with pytest.raises(popart.popart_exception, match="No tensor 'Accl1___w'"):
        session.getInfo(popart.reservedAccl1Prefix() + model.w)


def test_anchor_host_shapes_and_per_replica_values(trained):
    model, session, arrays, x, t, grad, accl = trained
    assert arrays[grad].shape == (BPS, AF, RF, 3, 2)
    assert arrays[accl].shape == (RF, 3, 2)
    assert arrays[model.loss].shape == (RF,)
    # The first micro-batch: each replica's own gradient, from the initial weights.
    params = {k: model.initial[getattr(model, k)].astype(np.float64) for k in ("w", "b")}
    for replica in range(RF):
        expected = regression_gradients(params, x[0, 0, replica], t[0, 0, replica])["w"]
        np.testing.assert_allclose(arrays[grad][0, 0, replica], expected, rtol=1e-5, atol=1e-6)
    # Replicas apply the same all-reduced update, so their optimizer state is the same.
    np.testing.assert_array_equal(arrays[accl][0], arrays[accl][1])


def test_broadcast_weights_checks_the_root_rank(trained):
    _, session, *_ = trained
    session.broadcastWeights(0)  # one PopRun instance: nothing to send
    with pytest.raises(popart.popart_exception, match="rootRank 1: there are 1 PopRun"):
        session.broadcastWeights(1)


def test_stream_callbacks_of_one_replica():
    model = build_regression()
    options = popart.SessionOptions()
    options.enableReplicatedGraphs = True
    options.replicatedGraphCount = RF
    session = popart.TrainingSession(
        model.proto,
        popart.DataFlow(BPS, {model.loss: popart.AnchorReturnType("All")}),
        model.loss,
        popart.SGD({"defaultLearningRate": (0.1, False)}),
        popart.DeviceManager().createIpuModelDevice({"numIPUs": RF}),
        userOptions=options,
    )
    rng = np.random.default_rng(9)
    x = rng.normal(size=(BPS, RF, 4, 3)).astype(np.float32)
    t = rng.normal(size=(BPS, RF, 4, 2)).astype(np.float32)
    replacement = rng.normal(size=(BPS, 4, 3)).astype(np.float32)
    fed = iter(replacement)
    seen = []
    # Replica 1 reads x from the callback (replica 0 from the step IO); its losses are seen.
    session.connectStreamToCallback(model.x, lambda buffer: buffer.__setitem__(..., next(fed)), 1)
    session.connectStreamToCallback(model.loss, lambda buffer: seen.append(float(buffer)), 1)
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO({model.x: x, model.t: t}, arrays))
    np.testing.assert_allclose(seen, arrays[model.loss][:, 1], rtol=1e-6)
    w, b = (model.initial[getattr(model, k)].astype(np.float64) for k in ("w", "b"))
    first = [
        np.mean((x[0, 0] @ w + b - t[0, 0]) ** 2),
        np.mean((replacement[0] @ w + b - t[0, 1]) ** 2),
    ]
    np.testing.assert_allclose(arrays[model.loss][0], first, rtol=1e-5)
