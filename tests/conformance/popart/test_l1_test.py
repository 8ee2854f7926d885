"""graphcore/popart tests/integration/operators_test/l1_test.py: ai.graphcore L1Loss,
unreduced in inference, Mean- or Sum-reduced in training with its gradient, in float16 and
float32, and the Sum reduction equal to a ReduceSum of the unreduced loss (Cpu; shapes
smaller than the original's largest)."""

import itertools

import numpy as np
import pytest

import popart

SHAPES = [(5, 3, 7), (9, 7, 2, 12), (3, 64, 64)]


@pytest.mark.follows("test_l1")
def test_l1(op_tester):
    op_tester.rtol, op_tester.atol = 5e-03, 1e-08
    for dtype, shape in itertools.product([np.float16, np.float32], SHAPES):
        data = np.random.random_sample(shape).astype(dtype) - dtype(0.5)
        scale = np.random.rand() - 0.5

        def init_builder(builder, data=data, scale=scale):
            tensor = builder.addInputTensor(data)
            return [
                builder.aiGraphcore.l1loss(
                    [tensor], scale, reduction=popart.ReductionType.NoReduction
                )
            ]

        op_tester.run(init_builder, lambda _, d=data, s=scale: [(np.abs(d) * s).astype(d.dtype)])


@pytest.mark.slow
@pytest.mark.follows("test_l1_training")
def test_l1_training(op_tester):
    op_tester.rtol, op_tester.atol = 1e-02, 1e-05
    g = popart.reservedGradientPrefix()
    reductions = (popart.ReductionType.Mean, popart.ReductionType.Sum)
    for reduction, dtype, shape in itertools.product(reductions, [np.float16, np.float32], SHAPES):
        data = np.random.random_sample(shape).astype(dtype)
        data[data < 0.5] -= dtype(1.0)
        if reduction == popart.ReductionType.Sum and dtype == np.float16:
            data = (data / shape[-1]).astype(dtype)
        scale = np.random.rand() - 0.5

        def init_builder(builder, data=data, scale=scale, reduction=reduction):
            tensor = builder.addInputTensor(data)
            return [builder.aiGraphcore.l1loss([tensor], scale, reduction=reduction), g + tensor]

        def reference(_, data=data, scale=scale, reduction=reduction):
            x = data.astype(np.float64)
            mean = reduction == popart.ReductionType.Mean
            loss = (np.abs(x).mean() if mean else np.abs(x).sum()) * scale
            grad = np.sign(x) * scale / (x.size if mean else 1)
            return [np.array(loss).astype(data.dtype), grad.astype(data.dtype)]

        op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
        op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_l1_reduction_equiv")
def test_l1_reduction_equiv():
    for shape in ([2, 3], [2, 4, 4], [5, 1, 3], [1, 1]):
        ip_data = np.random.rand(*shape).astype(np.float32)

        def anchors_of(extra_reduction, ip_data=ip_data):
            builder = popart.Builder()
            ip = builder.addInitializedInputTensor(ip_data)
            if extra_reduction:
                l1 = builder.aiGraphcore.l1loss(
                    [ip], 0.1, reduction=popart.ReductionType.NoReduction
                )
                loss = builder.aiOnnx.reducesum([l1])
            else:
                loss = builder.aiGraphcore.l1loss([ip], 0.1, reduction=popart.ReductionType.Sum)
            session = popart.TrainingSession(
                fnModel=builder.getModelProto(),
                loss=loss,
                dataFlow=popart.DataFlow(1, [loss, popart.reservedGradientPrefix() + ip]),
                optimizer=popart.ConstSGD(0.1),
                deviceInfo=popart.DeviceManager().createCpuDevice(),
                patterns=popart.Patterns(popart.PatternsLevel.NoPatterns).enableRuntimeAsserts(
                    False
                ),
            )
            session.prepareDevice()
            session.weightsFromHost()
            anchors = session.initAnchorArrays()
            session.run(popart.PyStepIO({}, anchors))
            return list(anchors.values())

        summed, reduced = anchors_of(False), anchors_of(True)
        np.testing.assert_allclose(summed[0], 0.1 * np.abs(ip_data).sum(), rtol=1e-5)
        for a0, a1 in zip(summed, reduced, strict=True):
            np.testing.assert_allclose(a0, a1, rtol=1e-6)
