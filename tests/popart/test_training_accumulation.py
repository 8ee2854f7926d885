"""Gradient accumulation (Sum, Mean with Post and Running strategies), replicated training
(2 and 4 replicas against one replica with the whole batch) and automatic loss scaling."""

from __future__ import annotations

import numpy as np
import pytest
from training_helpers import (
    build_regression,
    read_weights,
    regression_data,
    regression_gradients,
)

import popart


def options_for(accumulation=1, replicas=1, reduction=None, strategy=None):
    options = popart.SessionOptions()
    if accumulation > 1:
        options.enableGradientAccumulation = True
        options.accumulationFactor = accumulation
    if replicas > 1:
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = replicas
    if reduction is not None:
        options.accumulationAndReplicationReductionType = reduction
    if strategy is not None:
        options.meanAccumulationAndReplicationReductionStrategy = strategy
    return options


def session_for(model, optimizer, options, anchors, batches_per_step, replicas=1):
    session = popart.TrainingSession(
        model.proto,
        popart.DataFlow(batches_per_step, anchors),
        model.loss,
        optimizer,
        popart.DeviceManager().createIpuModelDevice({"numIPUs": replicas}),
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    return session


@pytest.mark.parametrize(
    "reduction, strategy",
    [
        (popart.ReductionType.Sum, None),
        (popart.ReductionType.Mean, popart.MeanReductionStrategy.Post),
        (popart.ReductionType.Mean, popart.MeanReductionStrategy.Running),
    ],
)
def test_gradient_accumulation_against_numpy(reduction, strategy):
    model = build_regression()
    accumulation, batches_per_step, lr, momentum = 3, 2, 0.05, 0.6
    optimizer = popart.SGD({"defaultLearningRate": (lr, True), "defaultMomentum": (momentum, True)})
    grad, accum = popart.reservedGradientPrefix() + model.w, popart.reservedAccumPrefix() + model.w
    anchors = {grad: popart.AnchorReturnType("All"), accum: popart.AnchorReturnType("All")}
    session = session_for(
        model,
        optimizer,
        options_for(accumulation, 1, reduction, strategy),
        anchors,
        batches_per_step,
    )
    arrays = session.initAnchorArrays()
    assert arrays[grad].shape == (batches_per_step, accumulation, 3, 2)
    x, t = regression_data(batches_per_step * accumulation)
    session.run(
        popart.PyStepIO(
            {
                model.x: x.reshape(batches_per_step, accumulation, *x.shape[1:]),
                model.t: t.reshape(batches_per_step, accumulation, *t.shape[1:]),
            },
            arrays,
        )
    )
    params = {
        k: v.astype(np.float64) for k, v in (("w", model.initial["w"]), ("b", model.initial["b"]))
    }
    velocity = {k: 0.0 for k in params}
    for step in range(batches_per_step):
        micro = [
            regression_gradients(params, x[step * accumulation + k], t[step * accumulation + k])
            for k in range(accumulation)
        ]
        np.testing.assert_allclose(
            arrays[grad][step], [g["w"] for g in micro], rtol=1e-5, atol=1e-6
        )
        partial = np.cumsum([g["w"] for g in micro], axis=0)
        if strategy is popart.MeanReductionStrategy.Running:
            partial /= np.arange(1, accumulation + 1)[:, None, None]
        np.testing.assert_allclose(arrays[accum][step], partial, rtol=1e-5, atol=1e-6)
        for name in params:
            total = sum(g[name] for g in micro)
            if reduction is popart.ReductionType.Mean:
                total /= accumulation
            velocity[name] = velocity[name] * momentum + total
            params[name] = params[name] - lr * velocity[name]
    weights = read_weights(session, model)
    for name in params:
        np.testing.assert_allclose(weights[name], params[name], rtol=1e-5, atol=1e-6)


REPLICATED_CASES = [
    # (replicas, accumulation, loss reduction and replica reduction, optimizer)
    (2, 1, "Sum", "sgd"),
    (4, 1, "Mean", "adam"),
    (2, 2, "Mean", "sgd"),
]


@pytest.mark.parametrize("replicas, accumulation, reduction, kind", REPLICATED_CASES)
def test_replicas_train_like_one_replica_with_the_whole_batch(
    replicas, accumulation, reduction, kind
):
    """Sum losses summed over replicas, or mean losses averaged over them, give the gradient of
    the whole batch, so R replicas of batch b train like one replica of batch R * b."""
    batch, batches_per_step, runs = 2, 2, 2
    reduction_type = getattr(popart.ReductionType, reduction)

    def optimizer():
        if kind == "adam":
            return popart.Adam({"defaultLearningRate": (0.02, False)})
        return popart.SGD({"defaultLearningRate": (0.05, False), "defaultMomentum": (0.5, True)})

    rng = np.random.default_rng(5)
    shape = (runs, batches_per_step, accumulation, replicas, batch)
    x = rng.normal(size=(*shape, 3)).astype(np.float32)
    t = rng.normal(size=(*shape, 2)).astype(np.float32)

    replicated_model = build_regression(reduction_type, batch)
    loss_anchor = {replicated_model.loss: popart.AnchorReturnType("All")}
    replicated = session_for(
        replicated_model, optimizer(), options_for(accumulation, replicas, reduction_type), loss_anchor,
        batches_per_step, replicas,
    )  # fmt: skip
    arrays = replicated.initAnchorArrays()
    expected_shape = [d for d in (batches_per_step, accumulation, replicas) if d > 1]
    assert list(arrays[replicated_model.loss].shape) == expected_shape
    replicated_model_losses_first_run = None
    for run in range(runs):
        host = {
            replicated_model.x: x[run].reshape(*expected_shape, batch, 3),
            replicated_model.t: t[run].reshape(*expected_shape, batch, 2),
        }
        replicated.run(popart.PyStepIO(host, arrays))
        if run == 0:  # [micro-batches..., replicas] -> the first micro-batch's replicas
            replicated_model_losses_first_run = (
                arrays[replicated_model.loss].reshape(-1, replicas).copy()
            )

    whole_model = build_regression(reduction_type, batch * replicas)
    whole = session_for(
        whole_model, optimizer(), options_for(accumulation, 1, reduction_type), {}, batches_per_step
    )
    for run in range(runs):
        host_shape = [d for d in (batches_per_step, accumulation) if d > 1]
        host = {
            whole_model.x: x[run].reshape(*host_shape, batch * replicas, 3),
            whole_model.t: t[run].reshape(*host_shape, batch * replicas, 2),
        }
        whole.run(popart.PyStepIO(host, {}))

    expected = read_weights(whole, whole_model)
    weights = read_weights(replicated, replicated_model)
    for name in expected:
        np.testing.assert_allclose(weights[name], expected[name], rtol=1e-5, atol=1e-6)

    # Each replica's loss is its own slice's: check the first micro-batch of the first run.
    replicated_first = replicated_model_losses_first_run[0]
    for replica in range(replicas):
        error = x[0, 0, 0, replica] @ replicated_model.initial["w"] + replicated_model.initial["b"]
        error = (error - t[0, 0, 0, replica]) ** 2
        expected_loss = error.sum() if reduction == "Sum" else error.mean()
        np.testing.assert_allclose(replicated_first[replica], expected_loss, rtol=1e-5)


def test_automatic_loss_scaling_follows_the_histogram_rule():
    model = build_regression(popart.ReductionType.Sum, dtype="FLOAT16")
    options = popart.SessionOptions()
    settings = options.automaticLossScalingSettings
    settings.enabled = True
    # Halve when any tracked element reaches a quarter of float16's range (so the doubled
    # scale of the next period cannot overflow), every second update.
    settings.binEdgeLocation = 0.25
    settings.thresholdUpperCountProportion = 0.0
    settings.updatePeriod = 2
    # Track the weights' gradients only, so that the anchored ones are all it counts.
    settings.gradientTensorTrackingMethod = (
        popart.GradientTensorTrackingMethod.GradientsOfUserSpecifiedTensors
    )
    settings.toTrackTensors = [model.w, model.b]
    optimizer = popart.SGD({"defaultLearningRate": (0.01, True), "lossScaling": (1024.0, False)})
    scale_id = popart.reservedLossScalingPrefix() + "FLOAT16"
    grads = [popart.reservedGradientPrefix() + name for name in (model.w, model.b)]
    names = [scale_id, "finalLossScale", "lossScaleUpdateFactor", *grads, model.w]
    anchors = {name: popart.AnchorReturnType("All") for name in names}
    steps = 10
    session = session_for(model, optimizer, options, anchors, steps)
    arrays = session.initAnchorArrays()
    x, t = regression_data(steps)
    x, t = x.astype(np.float16), t.astype(np.float16)
    session.run(popart.PyStepIO({model.x: x, model.t: t}, arrays))
    # The optimizer's loss scaling stays (float32 under automatic loss scaling); the final
    # loss scale is it times the factor.
    np.testing.assert_array_equal(arrays[scale_id], np.full([steps], 1024.0, np.float32))
    scales = arrays["finalLossScale"].astype(np.float64)
    edge = 0.25 * 65504
    expected = [1024.0]
    for step in range(steps - 1):
        values = np.concatenate([np.abs(arrays[g][step].astype(np.float64)).ravel() for g in grads])
        proportion = np.mean(values >= edge)
        scale = expected[-1]
        # The factor changes after weight updates 0, 2, 4, ... (as the original's counter).
        if step % 2 == 0:
            scale = scale / 2 if proportion > 0.0 else scale * 2
        expected.append(scale)
    np.testing.assert_array_equal(scales, expected)
    np.testing.assert_array_equal(arrays["lossScaleUpdateFactor"][:-1], scales[1:] / 1024.0)
    assert len(set(expected)) > 2  # it went up and down
    # The update removes the loss scaling: w' = w - lr * (scaled gradient) / scale. The
    # anchored weight is the one after the step's update (as the original's anchors are).
    for step in range(1, steps):
        change = arrays[model.w][step].astype(np.float64) - arrays[model.w][step - 1]
        np.testing.assert_allclose(
            change,
            -0.01 * arrays[grads[0]][step].astype(np.float64) / scales[step],
            rtol=0.02,
            atol=2e-3,
        )


def test_automatic_loss_scaling_rules():
    model = build_regression()
    options = popart.SessionOptions()
    options.automaticLossScalingSettings.enabled = True
    with pytest.raises(popart.popart_exception, match="must have non-const loss scaling"):
        session_for(model, popart.SGD({"lossScaling": (8.0, True)}), options, {}, 1)
    with pytest.raises(popart.popart_exception, match="No tracked gradient tensors of type fp16"):
        session_for(model, popart.SGD({"lossScaling": (8.0, False)}), options, {}, 1)
    with pytest.raises(
        popart.popart_exception, match="scaledOptimizerState and automaticLossScaling"
    ):
        session_for(
            model,
            popart.Adam({"lossScaling": (8.0, False)}, scaled_optimizer_state=True),
            options,
            {},
            1,
        )
