"""graphcore/popart tests/integration/graph_replication_test.py: an SGD step through a Gemm
with the optimizer's learning-rate and weight-decay tensors anchored, on one IPU and
replicated four times (each replica its own sample, the weights updated by their summed
gradients), replicated inference, and an IdentityLoss's gradient under replication with
and without the OpToIdentity pattern. The original runs the replicated ones on IPU
hardware; here on emulated IPUs."""

import numpy as np
import pytest

import popart

DEVICE = "IpuModel"
REPLICAS = 4
LR_TENSOR = "scaledLearningRate0___default___FLOAT"
WD_TENSOR = "weightDecayScaleFactor0___default___FLOAT"
PATTERNS = ["MulArgGradOp", "DecomposeBinaryConstScalar", "PreUniRepl", "MatMulRhsGradOp"]


def _gemm_step(op_tester, a, b, c, alpha, beta, replicas):
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(a)
        i2 = builder.addInitializedInputTensor(b)
        i3 = builder.addInitializedInputTensor(c)
        o = builder.aiOnnx.gemm([i1, i2, i3], alpha, beta, False, False)
        builder.addOutputTensor(o)
        return [o, g + i2, i2, g + i3, i3, LR_TENSOR, WD_TENSOR]

    def reference(_):
        samples = [a + n for n in range(replicas)]
        outputs = np.stack([alpha * s @ b + beta * c for s in samples])
        # A summed loss of the outputs: every output element has gradient one.
        grads_b = [alpha * s.T @ np.ones_like(c) for s in samples]
        grads_c = [beta * np.ones_like(c)] * replicas
        new_b = b - 0.01 * sum(grads_b)
        new_c = c - 0.01 * sum(grads_c)
        if replicas == 1:
            return [
                outputs[0],
                grads_b[0],
                new_b,
                grads_c[0],
                new_c,
                np.float32(0.01),
                np.float32(1.0),
            ]
        f32 = np.float32
        return [
            outputs, np.stack(grads_b).astype(f32), new_b, np.stack(grads_c).astype(f32), new_c,
            np.full(replicas, 0.01, f32), np.ones(replicas, f32),
        ]  # fmt: skip

    op_tester.lossReduction = popart.ReductionType.Sum
    op_tester.setPatterns(PATTERNS, enableRuntimeAsserts=False)
    if replicas > 1:
        op_tester.options.enableReplicatedGraphs = True
        op_tester.options.replicatedGraphCount = replicas
        op_tester.options.opxModifyChecking = False
        op_tester.numIPUs = replicas
    op_tester.rtol, op_tester.atol = 1e-5, 1e-6
    op_tester.run(
        init_builder,
        reference,
        "train",
        optimizer=popart.SGD({"defaultLearningRate": (0.01, False)}),
    )


@pytest.mark.follows("test_weight_update")
def test_weight_update(op_tester):
    a, b, c = np.ones((2, 4), np.float32), np.ones((4, 6), np.float32), np.zeros((2, 6), np.float32)
    _gemm_step(op_tester, a, b, c, 1.0, 1.0, 1)


@pytest.mark.follows("test_weight_update_replicated")
def test_weight_update_replicated(op_tester):
    a = np.random.rand(2, 4).astype(np.float32)
    b = np.ones((4, 6), np.float32)
    c = np.random.rand(2, 6).astype(np.float32)
    alpha = float(np.random.random(1).astype(np.float32)[0])
    beta = float(np.random.random(1).astype(np.float32)[0])
    _gemm_step(op_tester, a, b, c, alpha, beta, REPLICAS)


@pytest.mark.follows("test_replication_infer")
def test_replication_infer(op_tester):
    a = np.random.rand(2, 7).astype(np.float32)
    b = np.random.rand(7, 6).astype(np.float32)
    c = np.random.rand(1, 6).astype(np.float32)

    def init_builder(builder):
        i1 = builder.addInputTensor(a)
        i2 = builder.addInitializedInputTensor(b)
        i3 = builder.addInitializedInputTensor(c)
        o = builder.aiOnnx.gemm([i1, i2, i3], 1.0, 1.0, False, False)
        builder.addOutputTensor(o)
        return [o]

    expected = np.stack([(a + n) @ b + c for n in range(REPLICAS)])
    op_tester.setPatterns(["DecomposeBinaryConstScalar", "PreUniRepl"], enableRuntimeAsserts=False)
    op_tester.options.enableReplicatedGraphs = True
    op_tester.options.replicatedGraphCount = REPLICAS
    op_tester.numIPUs = REPLICAS
    op_tester.options.opxModifyChecking = False
    op_tester.rtol = 1e-5
    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_identity_loss_grad_replication")
def test_identity_loss_grad_replication():
    t_data = np.random.rand(8).astype(np.float32)

    def t0_grad(op_to_identity):
        builder = popart.Builder()
        t0 = builder.addInputTensor("FLOAT", [1, 4])
        t1 = builder.addInputTensor("FLOAT", [4, 1])
        t2 = builder.aiOnnx.matmul([t0, t1])
        t3 = builder.aiGraphcore.identityloss([t2], reduction=popart.ReductionType.Mean)
        options = popart.SessionOptions()
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = 2
        patterns = popart.Patterns()
        patterns.OpToIdentity = op_to_identity
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
            dataFlow=popart.DataFlow(1, [t3, popart.reservedGradientPrefix() + t0]),
            loss=t3,
            optimizer=popart.ConstSGD(0.1),
            userOptions=options,
            patterns=patterns,
        )
        anchors = session.initAnchorArrays()
        session.prepareDevice()
        feed = {t0: t_data.reshape(2, 1, 4), t1: t_data.reshape(2, 4, 1)}
        session.run(popart.PyStepIO(feed, anchors))
        return anchors[popart.reservedGradientPrefix() + t0]

    with_pattern, without = t0_grad(True), t0_grad(False)
    np.testing.assert_array_equal(with_pattern, without)
    # d(t0 @ t1)/d t0 is t1 transposed, per replica.
    np.testing.assert_allclose(with_pattern.reshape(2, 4), t_data.reshape(2, 4), rtol=1e-6)
