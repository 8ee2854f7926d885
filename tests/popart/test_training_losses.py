"""The loss ops in training: nllloss (reductions, ignoreIndex, log-probability input), l1loss,
identityloss and ctcloss, their values and the gradients the session computes, against
numpy (analytic gradients, and finite differences of a numpy CTC)."""

from __future__ import annotations

import numpy as np
import pytest

import popart

GRAD = popart.reservedGradientPrefix()


def one_step(proto, loss, inputs, anchors):
    """One training step (SGD, a tiny learning rate); returns the anchors' values."""
    session = popart.TrainingSession(
        proto,
        popart.DataFlow(1, {name: popart.AnchorReturnType("All") for name in anchors}),
        loss,
        popart.SGD({"defaultLearningRate": (1e-6, True)}),
        popart.DeviceManager().createIpuModelDevice({}),
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO(inputs, arrays))
    return arrays


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize(
    "reduction, ignore, log_input",
    [("Mean", None, False), ("Sum", 2, False), ("Mean", 1, True), ("NoReduction", None, True)],
)
def test_nllloss(reduction, ignore, log_input):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 4)).astype(np.float32)
    labels = np.array([0, 1, 2, 3, 1, 2], np.int32)
    builder = popart.Builder()
    z = builder.addInitializedInputTensor(logits, "z")
    label = builder.addInputTensor(popart.TensorInfo("INT32", [6]), "label")
    if log_input:
        probabilities = builder.aiOnnx.logsoftmax([z], axis=1)
    else:
        probabilities = builder.aiOnnx.softmax([z], axis=1)
    loss = builder.aiGraphcore.nllloss(
        [probabilities, label],
        reduction=getattr(popart.ReductionType, reduction),
        ignoreIndex=ignore,
        inputIsLogProbability=log_input,
    )
    if reduction == "NoReduction":  # per-sample losses, reduced to a scalar by identityloss
        per_sample = loss
        loss = builder.aiGraphcore.identityloss([loss], reduction=popart.ReductionType.Sum)
    arrays = one_step(builder.getModelProto(), loss, {label: labels}, [loss, GRAD + z])
    p = softmax(logits.astype(np.float64), axis=1)
    kept = labels != ignore if ignore is not None else np.ones(6, bool)
    losses = np.where(kept, -np.log(p[np.arange(6), labels]), 0)
    weights = kept.astype(np.float64)
    if reduction == "Mean":
        weights /= max(kept.sum(), 1)
    np.testing.assert_allclose(
        arrays[loss], (losses * (weights if reduction == "Mean" else kept)).sum(), rtol=1e-5
    )
    expected = (p - np.eye(4)[labels]) * weights[:, None]
    np.testing.assert_allclose(arrays[GRAD + z], expected, rtol=1e-5, atol=1e-6)
    if reduction == "NoReduction":
        assert per_sample


def test_l1loss_and_identityloss():
    x = np.array([[1.5, -2.0, 0.5], [-0.25, 3.0, -1.0]], np.float32)
    builder = popart.Builder()
    w = builder.addInitializedInputTensor(x, "w")
    l1 = builder.aiGraphcore.l1loss([w], 0.3, reduction=popart.ReductionType.Mean)
    v = builder.addInitializedInputTensor(x * 2, "v")
    identity = builder.aiGraphcore.identityloss([v], reduction=popart.ReductionType.Sum)
    loss = builder.aiOnnx.add([l1, identity])
    arrays = one_step(builder.getModelProto(), loss, {}, [l1, identity, GRAD + w, GRAD + v])
    np.testing.assert_allclose(arrays[l1], 0.3 * np.abs(x).mean(), rtol=1e-6)
    np.testing.assert_allclose(arrays[identity], (2 * x).sum(), rtol=1e-6)
    np.testing.assert_allclose(arrays[GRAD + w], 0.3 * np.sign(x) / x.size, rtol=1e-6)
    np.testing.assert_allclose(arrays[GRAD + v], np.ones_like(x), rtol=1e-6)


def numpy_ctc(log_probs, targets, input_lengths, target_lengths, blank=0):
    """Per-sample CTC losses by the forward (alpha) recursion, in log space."""
    losses = []
    for n in range(log_probs.shape[1]):
        label = [blank]
        for symbol in targets[n, : target_lengths[n]]:
            label += [int(symbol), blank]
        alpha = np.full(len(label), -np.inf)
        lp = log_probs[: input_lengths[n], n]
        alpha[0] = lp[0, blank]
        if len(label) > 1:
            alpha[1] = lp[0, label[1]]
        for t in range(1, len(lp)):
            previous = alpha.copy()
            for s in range(len(label)):
                candidates = [previous[s]]
                if s > 0:
                    candidates.append(previous[s - 1])
                if s > 1 and label[s] != blank and label[s] != label[s - 2]:
                    candidates.append(previous[s - 2])
                alpha[s] = np.logaddexp.reduce(candidates) + lp[t, label[s]]
        losses.append(-np.logaddexp(alpha[-1], alpha[-2] if len(label) > 1 else -np.inf))
    return np.array(losses)


def test_ctcloss_value_and_gradient():
    rng = np.random.default_rng(1)
    steps, batch, classes = 6, 2, 4
    logits = rng.normal(size=(steps, batch, classes))
    targets = np.array([[1, 2, 2], [3, 1, 0]], np.int32)
    input_lengths = np.array([6, 5], np.int32)
    target_lengths = np.array([3, 2], np.int32)
    builder = popart.Builder()
    z = builder.addInitializedInputTensor(logits.astype(np.float32), "z")
    target = builder.addInputTensor(popart.TensorInfo("INT32", [batch, 3]), "targets")
    in_len = builder.addInputTensor(popart.TensorInfo("INT32", [batch]), "input_lengths")
    out_len = builder.addInputTensor(popart.TensorInfo("INT32", [batch]), "target_lengths")
    log_probs = builder.aiOnnx.logsoftmax([z], axis=2)
    loss = builder.aiGraphcore.ctcloss([log_probs, target, in_len, out_len])
    arrays = one_step(
        builder.getModelProto(),
        loss,
        {target: targets, in_len: input_lengths, out_len: target_lengths},
        [loss, GRAD + z],
    )

    def reference(z_values):
        lp = z_values - np.log(np.exp(z_values).sum(axis=2, keepdims=True))
        per_sample = numpy_ctc(lp, targets, input_lengths, target_lengths)
        return np.mean(per_sample / target_lengths)  # Mean: each loss over its target length

    np.testing.assert_allclose(arrays[loss], reference(logits), rtol=1e-5)
    numeric = np.zeros_like(logits)
    step = 1e-6
    for index in np.ndindex(logits.shape):
        shifted = logits.copy()
        shifted[index] += step
        above = reference(shifted)
        shifted[index] -= 2 * step
        numeric[index] = (above - reference(shifted)) / (2 * step)
    np.testing.assert_allclose(arrays[GRAD + z], numeric, rtol=1e-4, atol=1e-6)


def test_ctcloss_zero_infinity_zeroes_impossible_samples_and_their_gradients():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(3, 2, 4)).astype(np.float32)
    targets = np.array([[1, 2, 2], [3, 0, 0]], np.int32)  # 1 2 2 needs 4 steps; 3 are given
    lengths = {
        "input_lengths": np.array([3, 3], np.int32),
        "target_lengths": np.array([3, 1], np.int32),
    }
    builder = popart.Builder()
    z = builder.addInitializedInputTensor(logits, "z")
    target = builder.addInputTensor(popart.TensorInfo("INT32", [2, 3]), "targets")
    in_len = builder.addInputTensor(popart.TensorInfo("INT32", [2]), "input_lengths")
    out_len = builder.addInputTensor(popart.TensorInfo("INT32", [2]), "target_lengths")
    log_probs = builder.aiOnnx.logsoftmax([z], axis=2)
    loss = builder.aiGraphcore.ctcloss(
        [log_probs, target, in_len, out_len], reduction=popart.ReductionType.Sum, zeroInfinity=True
    )
    arrays = one_step(
        builder.getModelProto(),
        loss,
        {target: targets, in_len: lengths["input_lengths"], out_len: lengths["target_lengths"]},
        [loss, GRAD + z],
    )
    lp = logits.astype(np.float64)
    lp = lp - np.log(np.exp(lp).sum(axis=2, keepdims=True))
    per_sample = numpy_ctc(lp, targets, lengths["input_lengths"], lengths["target_lengths"])
    assert np.isinf(per_sample[0])
    np.testing.assert_allclose(arrays[loss], per_sample[1], rtol=1e-5)
    np.testing.assert_array_equal(arrays[GRAD + z][:, 0], 0.0)
    assert np.all(np.isfinite(arrays[GRAD + z]))
