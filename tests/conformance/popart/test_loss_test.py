"""graphcore/popart tests/integration/operators_test/loss_test.py: ai.graphcore NllLoss over
3-D probabilities, with an ignored index, Mean/Sum/no reduction (no reduction cannot be the
loss), its gradient with and without the SoftmaxGradDirect patterns, the label shape error,
scaled Nll and L1 losses added, Sum equal to a ReduceSum of the unreduced loss, no underflow
in float16, log-probability input, and all labels ignored (Cpu)."""

import numpy as np
import pytest

import popart

LEARNING_RATE, WEIGHT_DECAY = 1e-3, 1e-2
REDUCTIONS = (popart.ReductionType.Mean, popart.ReductionType.NoReduction, popart.ReductionType.Sum)


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def nll(log_probs, labels, reduction, ignore_index=None):
    """torch.nn.NLLLoss over the last axis: Mean divides by the labels not ignored."""
    picked = -np.take_along_axis(log_probs, labels[..., None].clip(0), axis=-1)[..., 0]
    kept = np.ones(labels.shape, bool) if ignore_index is None else labels != ignore_index
    losses = np.where(kept, picked, 0.0)
    if reduction == popart.ReductionType.NoReduction:
        return losses
    if reduction == popart.ReductionType.Sum:
        return losses.sum()
    return losses.sum() / kept.sum() if kept.any() else np.float64(0.0)


def _patterns(with_patterns):
    if with_patterns:
        return popart.Patterns(popart.PatternsLevel.All)
    return popart.Patterns(popart.PatternsLevel.NoPatterns).enableRuntimeAsserts(False)


def _train_once(builder, loss, anchors, patterns, inputs, optimizer=None):
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(1, anchors),
        optimizer=optimizer or popart.ConstSGD(LEARNING_RATE, WEIGHT_DECAY),
        loss=loss,
        patterns=patterns,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    session.run(popart.PyStepIO(inputs, arrays))
    return arrays


def _softmax_nll(ip_data, lb_data, reduction, with_patterns, ignore_index=None):
    """Train once on NllLoss(Softmax(ip)); the loss must match, or (no reduction) be refused."""
    builder = popart.Builder()
    ip = builder.addInitializedInputTensor(ip_data)
    lb = builder.addInputTensor(popart.TensorInfo("INT32", list(lb_data.shape)))
    out = builder.aiOnnx.softmax([ip], axis=lb_data.ndim)
    kwargs = {} if ignore_index is None else {"ignoreIndex": ignore_index}
    loss = builder.aiGraphcore.nllloss([out, lb], reduction=reduction, **kwargs)
    if reduction == popart.ReductionType.NoReduction:
        with pytest.raises(popart.popart_exception) as e_info:
            _train_once(builder, loss, [loss, out], _patterns(with_patterns), {})
        assert e_info.value.args[0].endswith("must be a scalar tensor")
        return
    arrays = _train_once(
        builder, loss, [loss, out], _patterns(with_patterns), {lb: lb_data.astype(np.int32)}
    )
    # Softmax-11 coerces to 2-D from its axis: over the last axis here.
    expected = nll(np.log(_softmax(ip_data.astype(np.float64))), lb_data, reduction, ignore_index)
    np.testing.assert_allclose(arrays[loss], expected, rtol=1e-5)


@pytest.mark.follows("test_3d_nll_loss_input")
def test_3d_nll_loss_input():
    rng = np.random.RandomState(0)
    ip_data = rng.rand(2, 4, 3).astype(np.float32)
    lb_data = rng.randint(3, size=[2, 4])
    for reduction in REDUCTIONS:
        for with_patterns in (False, True):
            _softmax_nll(ip_data, lb_data, reduction, with_patterns)


@pytest.mark.follows("test_nll_loss_with_ignored_index")
def test_nll_loss_with_ignored_index():
    ip_data = np.random.RandomState(0).rand(2, 8).astype(np.float32)
    for reduction in REDUCTIONS:
        for with_patterns in (False, True):
            _softmax_nll(ip_data, np.array([1, 7]), reduction, with_patterns, ignore_index=1)


@pytest.mark.follows("test_nll_loss_grad_with_ignored_index")
def test_nll_loss_grad_with_ignored_index():
    ip_data = np.random.RandomState(0).rand(3, 8).astype(np.float32)
    lb_data = np.array([1, 7, 4])
    for reduction in (popart.ReductionType.Mean, popart.ReductionType.Sum):
        builder = popart.Builder()
        ip = builder.addInitializedInputTensor(ip_data)
        lb = builder.addInputTensor(popart.TensorInfo("INT32", [3]))
        out = builder.aiOnnx.softmax([ip], axis=1)
        loss = builder.aiGraphcore.nllloss([out, lb], ignoreIndex=1, reduction=reduction)
        grad = popart.reservedGradientPrefix() + ip
        # d loss / d logits = softmax - onehot, per kept sample, divided by the kept count.
        kept = (lb_data != 1)[:, None]
        expected = (_softmax(ip_data.astype(np.float64)) - np.eye(8)[lb_data]) * kept
        if reduction == popart.ReductionType.Mean:
            expected /= kept.sum()
        for names in (["PreUniRepl", "SoftmaxGradDirect"], ["PreUniRepl"]):
            patterns = popart.Patterns(names).enableRuntimeAsserts(False)
            arrays = _train_once(builder, loss, [grad], patterns, {lb: lb_data.astype(np.int32)})
            np.testing.assert_allclose(arrays[grad], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.follows("test_nll_loss_input_with_invalid_input")
def test_nll_loss_input_with_invalid_input():
    builder = popart.Builder()
    ip = builder.addInitializedInputTensor(np.random.rand(2, 4, 3).astype(np.float32))
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [2, 5]))  # does not match
    out = builder.aiOnnx.softmax([ip], axis=2)
    loss = builder.aiGraphcore.nllloss([out, lb], popart.ReductionType.NoReduction)
    with pytest.raises(popart.popart_exception) as e_info:
        popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, [loss]),
            optimizer=popart.ConstSGD(LEARNING_RATE, WEIGHT_DECAY),
            loss=loss,
            patterns=_patterns(False),
            deviceInfo=popart.DeviceManager().createCpuDevice(),
        )
    assert e_info.value.args[0].startswith(
        "The label tensor (INT32   [2 5]) must have shape [2 4] to match all but the final "
        "dimension of the probabilities tensor (FLOAT   [2 4 3])"
    )


@pytest.mark.follows("test_loss_scaling")
@pytest.mark.parametrize("ignore_index", (None, 1, -1))
@pytest.mark.parametrize("reduction", (popart.ReductionType.Mean, popart.ReductionType.Sum))
def test_loss_scaling(ignore_index, reduction, op_tester):
    nll_scale, l1_scale = 1.2, 1.5
    ip_data = np.random.rand(2, 3).astype(np.float32)
    lb_data = np.random.randint(3, size=[2])
    g = popart.reservedGradientPrefix()
    ids = {}

    def init_builder(builder):
        ip = builder.addInitializedInputTensor(ip_data)
        lb = builder.addInputTensor(lb_data.astype(np.int32))
        sm = builder.aiOnnx.softmax([ip], axis=1)
        nll_ = builder.aiGraphcore.nllloss([sm, lb], reduction=reduction, ignoreIndex=ignore_index)
        nll_scaled = builder.aiGraphcore.scale([nll_], nll_scale)
        l1 = builder.aiGraphcore.l1loss([ip], 1.0, reduction=reduction)
        l1_scaled = builder.aiGraphcore.scale([l1], l1_scale)
        out = builder.aiOnnx.add([nll_scaled, l1_scaled])
        builder.addOutputTensor(out)
        ids["ip"] = ip
        return [out, l1_scaled, nll_scaled, g + ip, g + out]

    def reference(ref_data):
        x = ip_data.astype(np.float64)
        # torch's NLLLoss treats a falsy ignore_index (None, 0) as none.
        ignore = ignore_index if ignore_index else None
        nll_scaled = nll(np.log(_softmax(x)), lb_data, reduction, ignore) * nll_scale
        mean = reduction == popart.ReductionType.Mean
        l1_scaled = (np.abs(x).mean() if mean else np.abs(x).sum()) * l1_scale
        d__o = float(ref_data.getOutputTensorGrad(0))
        kept = np.ones((2, 1)) if ignore is None else (lb_data != ignore)[:, None]
        d_nll = (_softmax(x) - np.eye(3)[lb_data]) * kept
        if mean:
            d_nll = d_nll / max(kept.sum(), 1)
        d_l1 = np.sign(x) / (x.size if mean else 1)
        grad = d__o * (nll_scale * d_nll + l1_scale * d_l1)
        f32 = np.float32
        return [
            f32(nll_scaled + l1_scaled),
            f32(l1_scaled),
            f32(nll_scaled),
            grad.astype(f32),
            None,
        ]

    op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.rtol, op_tester.atol = 1e-5, 1e-7
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_nllloss_reduction_equiv")
def test_nllloss_reduction_equiv():
    for shape in ([2, 3], [2, 4, 4], [5, 1, 3], [1, 1]):
        lshape, classes = shape[:-1], shape[-1]
        ip_data = np.random.rand(*shape).astype(np.float32)
        lb_data = np.random.randint(classes, size=lshape)
        for names in (
            ["PreUniRepl"],
            ["PreUniRepl", "SoftmaxGradDirect"],
            ["PreUniRepl", "SoftmaxGradDirect", "NlllWithSoftmaxGradDirect"],
        ):
            results = []
            for extra_reduction in (False, True):
                builder = popart.Builder()
                ip = builder.addInitializedInputTensor(ip_data)
                lb = builder.addInputTensor("INT32", lshape)
                sm = builder.aiOnnx.softmax([ip], axis=len(lshape))
                if extra_reduction:
                    unreduced = builder.aiGraphcore.nllloss(
                        [sm, lb], reduction=popart.ReductionType.NoReduction
                    )
                    loss = builder.aiOnnx.reducesum([unreduced])
                else:
                    loss = builder.aiGraphcore.nllloss([sm, lb], reduction=popart.ReductionType.Sum)
                anchors = [popart.reservedGradientPrefix() + ip]
                if "SoftmaxGradDirect" not in names or "NlllWithSoftmaxGradDirect" in names:
                    anchors.append(loss)
                patterns = popart.Patterns(names).enableRuntimeAsserts(False)
                arrays = _train_once(
                    builder, loss, anchors, patterns, {lb: lb_data.astype(np.int32)},
                    popart.ConstSGD(0.1),
                )  # fmt: skip
                results.append(list(arrays.values()))
            for a0, a1 in zip(*results, strict=True):
                np.testing.assert_allclose(a0, np.reshape(a1, np.shape(a0)), rtol=1e-5, atol=1e-7)


@pytest.mark.follows("test_nll_no_underflow")
def test_nll_no_underflow():
    probs_np = np.array(
        [
            [1.0, 0.0, 0.0, 0.0, 0.0],
            [0.5, 0.5, 0.0, 0.0, 0.0],
            [1 / 3.0, 1 / 3.0, 1 / 3.0, 0.0, 0.0],
            [0.25, 0.25, 0.25, 0.25, 0.0],
            [0.2, 0.2, 0.2, 0.2, 0.2],
        ],
        np.float16,
    )
    builder = popart.Builder()
    probs = builder.addInitializedInputTensor(probs_np, "probs")
    builder.addOutputTensor(builder.aiOnnx.identity([probs]))
    dprobs = popart.reservedGradientPrefix() + probs
    labels = builder.addInputTensor(popart.TensorInfo("INT32", [5]))
    loss = builder.aiGraphcore.nllloss(
        [probs, labels], popart.ReductionType.Sum, debugContext="nllLossVal"
    )
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        loss=loss,
        deviceInfo=popart.DeviceManager().createIpuModelDevice({}),
        optimizer=popart.ConstSGD(0.00001),
        dataFlow=popart.DataFlow(
            1, {dprobs: popart.AnchorReturnType("ALL"), loss: popart.AnchorReturnType("ALL")}
        ),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({labels: np.arange(5, dtype=np.int32)}, anchors))
    assert not np.isnan(anchors[loss]).any()
    assert not np.isnan(anchors[dprobs]).any()
    # -sum(log(1/k)) for k = 1..5.
    np.testing.assert_allclose(anchors[loss], np.log(np.arange(1, 6)).sum(), rtol=1e-2)


def _log_probability_nll(op_tester, train):
    rng = np.random.RandomState(0)
    data = rng.rand(3, 5).astype(np.float32)
    target = rng.randint(5, size=3)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        p = builder.addInitializedInputTensor(data)
        add_target = builder.addInputTensor if train else builder.addInitializedInputTensor
        t = add_target(target.astype(np.int32))
        log_p = builder.aiOnnx.logsoftmax([p], axis=1)
        loss = builder.aiGraphcore.nllloss([log_p, t], inputIsLogProbability=1)
        builder.addOutputTensor(loss)
        return [loss, g + p, g + loss] if train else [loss]

    def reference(ref_data):
        x = data.astype(np.float64)
        loss = np.float32(nll(np.log(_softmax(x)), target, popart.ReductionType.Mean))
        if not train:
            return [loss]
        d__loss = float(ref_data.getOutputTensorGrad(0))
        grad = d__loss * (_softmax(x) - np.eye(5)[target]) / 3
        return [loss, grad.astype(np.float32), None]

    if train:
        op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.rtol, op_tester.atol = 1e-5, 1e-7
    op_tester.run(init_builder, reference, "train" if train else "infer", seed=8)


@pytest.mark.follows("test_nll_input_is_log_probability")
def test_nll_input_is_log_probability(op_tester):
    _log_probability_nll(op_tester, False)


@pytest.mark.follows("test_nll_input_is_log_probability_training")
def test_nll_input_is_log_probability_training(op_tester):
    _log_probability_nll(op_tester, True)


@pytest.mark.follows("test_nll_all_ignore_index")
def test_nll_all_ignore_index(op_tester):
    rng = np.random.RandomState(0)
    data = rng.random_sample([10, 10]).astype(np.float32)
    target = -np.ones([10], np.int32)
    weight = rng.random_sample([10]).astype(np.float32)
    bias = rng.random_sample([10]).astype(np.float32)

    def init_builder(builder):
        p = builder.addInputTensor(data)
        t = builder.addInputTensor(target)
        w = builder.addInitializedInputTensor(weight)
        b = builder.addInitializedInputTensor(bias)
        out = builder.aiOnnx.add([builder.aiOnnx.matmul([p, w]), b])
        log_p = builder.aiOnnx.logsoftmax([p], axis=1)
        loss = builder.aiGraphcore.nllloss(
            [log_p, t], ignoreIndex=-1, reduction=popart.ReductionType.Mean
        )
        builder.addOutputTensor(loss)
        builder.addOutputTensor(out)
        return [out, loss]

    # Every label ignored: a zero loss, not 0/0.
    op_tester.rtol = 1e-5
    op_tester.run(init_builder, lambda _: [data @ weight + bias, np.float32(0.0)])


def _ctc_nll(log_probs, target, input_length, blank):
    """-log p(target | log_probs[:input_length]) by the CTC forward recursion (float64)."""
    extended = [blank]
    for label in target:
        extended += [int(label), blank]
    alpha = np.full(len(extended), -np.inf)
    alpha[0] = log_probs[0, blank]
    if len(extended) > 1:
        alpha[1] = log_probs[0, extended[1]]
    for t in range(1, input_length):
        previous = alpha.copy()
        for s, label in enumerate(extended):
            terms = [previous[s]]
            if s >= 1:
                terms.append(previous[s - 1])
            if s >= 2 and label != blank and label != extended[s - 2]:
                terms.append(previous[s - 2])
            alpha[s] = np.logaddexp.reduce(terms) + log_probs[t, label]
    return -np.logaddexp.reduce(alpha[-2:] if len(extended) > 1 else alpha[-1:])


def _ctc_reference(logits, targets, input_lengths, target_lengths, blank, reduction, zero_inf):
    """torch.nn.CTCLoss of log_softmax(logits) [T, N, C]: Mean divides each loss by its target
    length (at least 1) and averages; zero_infinity makes infinite losses 0."""
    log_probs = logits - np.logaddexp.reduce(logits, axis=2, keepdims=True)
    losses = np.array(
        [
            _ctc_nll(log_probs[:, n], targets[n, : target_lengths[n]], input_lengths[n], blank)
            for n in range(logits.shape[1])
        ]
    )
    if zero_inf:
        losses = np.where(np.isinf(losses), 0.0, losses)
    if reduction == "mean":
        return np.mean(losses / np.maximum(target_lengths, 1))
    return losses.sum() if reduction == "sum" else losses


@pytest.mark.follows("test_ctc_loss")
@pytest.mark.parametrize("blank", [0, 1])
@pytest.mark.parametrize("step_type", ["infer", "train"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss(op_tester, blank, step_type, reduction, zero_infinity):
    rng = np.random.RandomState(0)
    reductions = {
        "none": popart.ReductionType.NoReduction,
        "mean": popart.ReductionType.Mean,
        "sum": popart.ReductionType.Sum,
    }
    # Longer targets than inputs with zero_infinity, so that infinite losses arise.
    T, N, C, S = 6, 4, 3, (8 if zero_infinity else 2)  # noqa: N806
    logits_data = rng.rand(T, N, C).astype(np.float32)
    targets_data = rng.randint(1, C, size=(N, S)).astype(np.uint32)
    input_lengths_data = np.full((N,), T).astype(np.uint32)
    target_lengths_data = rng.randint(0, S + 1, size=(N,)).astype(np.uint32)
    if blank != 0:
        targets_data = np.where(targets_data == blank, 0, targets_data).astype(np.uint32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        logits = builder.addInputTensor(logits_data)
        targets = builder.addInputTensor(targets_data)
        input_lengths = builder.addInputTensor(input_lengths_data)
        target_lengths = builder.addInputTensor(target_lengths_data)
        log_probs = builder.aiOnnx.logsoftmax([logits], axis=2)
        ctc = builder.aiGraphcore.ctcloss(
            [log_probs, targets, input_lengths, target_lengths],
            reductions[reduction],
            blank,
            zeroInfinity=zero_infinity,
        )
        builder.addOutputTensor(ctc)
        assert builder.getTensorShape(ctc) == ([N] if reduction == "none" else [])
        if step_type == "infer":
            return [ctc, logits, log_probs]
        return [ctc, logits, log_probs, g + logits, g + ctc]

    def reference(ref_data):
        x = logits_data.astype(np.float64)
        args = (targets_data, input_lengths_data, target_lengths_data, blank, reduction)
        loss = _ctc_reference(x, *args, zero_infinity)
        log_probs = x - np.logaddexp.reduce(x, axis=2, keepdims=True)
        f32 = np.float32
        outputs = [np.asarray(loss).astype(f32), logits_data, log_probs.astype(f32)]
        if step_type == "infer":
            return outputs
        d_ctc = np.asarray(ref_data.getOutputTensorGrad(0), np.float64)
        # d(sum(d_ctc * loss))/d logits by central differences of the float64 reference.
        grad, h = np.zeros_like(x), 1e-6
        for index in np.ndindex(x.shape):
            up, down = x.copy(), x.copy()
            up[index] += h
            down[index] -= h
            diff = _ctc_reference(up, *args, zero_infinity) - _ctc_reference(
                down, *args, zero_infinity
            )
            grad[index] = np.sum(d_ctc * np.nan_to_num(diff)) / (2 * h)
        return [*outputs, grad.astype(f32), None]

    op_tester.atol = 1e-07
    op_tester.setPatterns([], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, step_type=step_type, seed=8)
