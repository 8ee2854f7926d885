"""graphcore/popart tests/integration/optimizer_tests/global_batch_size_test.py: the same
global batch split by replication, gradient accumulation and batch serialisation (alone and
combined) trains to the same outputs, loss and weights as one large compute batch, for SGD
(plain, momentum with combined or separate accumulators) and Adam, summed or averaged (running
or post) reductions, unrolled or looped batch serialisation, with and without explicit main
loops. The original runs on IPU hardware; here on emulated IPUs, with fewer combinations and
splits (it runs them all)."""

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from popart_session_helpers import ipu_model_device

import popart

BATCHES_PER_STEP = 2
HIDDEN = 4


def _optimizer(name):
    sgd_momentum = {
        "defaultLearningRate": (0.1, False),
        "defaultMomentum": (0.9, False),
        "defaultDampening": (0.1, False),
        "lossScaling": (20, False),
    }
    if name == "SGD":
        return popart.SGD({"defaultLearningRate": (0.1, False), "lossScaling": (20, False)})
    if name == "SGDM1":
        return popart.SGD(
            sgd_momentum, accumulatorAndMomentum=popart.SGDAccumulatorAndMomentum.Combined
        )
    if name == "SGDM2":
        return popart.SGD(
            sgd_momentum, accumulatorAndMomentum=popart.SGDAccumulatorAndMomentum.Separate
        )
    return popart.Adam(
        {
            "defaultLearningRate": (0.1, False),
            "defaultBeta1": (0.9, False),
            "defaultBeta2": (0.999, False),
            "lossScaling": (20, False),
        },
        mode=popart.AdamMode.AdamNoBias,
    )


def _run(tmp_path, optim, reduction_type, batchserial, explicit_loops, split):
    compute_batch, serialisation, accumulation, replication = split
    micro_batch = compute_batch * serialisation
    global_batch = micro_batch * accumulation * replication
    np.random.seed(1984)
    input_data = np.random.rand(BATCHES_PER_STEP, global_batch, HIDDEN).astype(np.float32)
    weight_data = np.random.rand(HIDDEN, HIDDEN).astype(np.float32)
    labels = np.random.randint(0, HIDDEN, size=BATCHES_PER_STEP * global_batch)
    feed_shape = (BATCHES_PER_STEP, replication, accumulation, micro_batch, -1)

    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", (micro_batch, HIDDEN)), "data0")
    w0 = builder.addInitializedInputTensor(weight_data, "weight0")
    x = builder.aiOnnx.softmax([builder.aiOnnx.matmul([d0, w0])])
    l0 = builder.addInputTensor(popart.TensorInfo("UINT32", (micro_batch,)), "data0")
    reduction = popart.ReductionType.Sum if reduction_type == "Sum" else popart.ReductionType.Mean
    loss = builder.aiGraphcore.nllloss([x, l0], reduction=reduction, debugContext="loss")
    feeds = {
        d0: input_data.reshape(feed_shape),
        l0: labels.reshape(feed_shape).astype(np.uint32),
    }

    options = popart.SessionOptions()
    if explicit_loops:
        options.enableExplicitMainLoops = True
        options.aliasZeroCopy = True
        options.explicitRecomputation = True
        options.useHostCopyOps = True
    options.batchSerializationSettings.factor = serialisation
    if serialisation > 1 and batchserial == "Loop":
        options.batchSerializationSettings.method = popart.BatchSerializationMethod.Loop
        options.batchSerializationSettings.transformContext = (
            popart.BatchSerializationTransformContext.Bwd
        )
    options.accumulationAndReplicationReductionType = reduction
    if accumulation > 1:
        options.enableGradientAccumulation = True
        options.accumulationFactor = accumulation
        if reduction_type == "MeanRunning":
            options.meanAccumulationAndReplicationReductionStrategy = (
                popart.MeanReductionStrategy.Running
            )
        if reduction_type == "MeanPost":
            options.meanAccumulationAndReplicationReductionStrategy = (
                popart.MeanReductionStrategy.Post
            )
    if replication > 1:
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = replication

    device = ipu_model_device(replication)
    try:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(
                BATCHES_PER_STEP, {t: popart.AnchorReturnType("ALL") for t in (x, loss)}
            ),
            userOptions=options,
            loss=loss,
            optimizer=_optimizer(optim),
            patterns=popart.Patterns(popart.PatternsLevel.All),
            deviceInfo=device,
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO(feeds, anchors))
        path = str(tmp_path / f"model_{'_'.join(map(str, split))}.onnx")
        session.modelToHost(path)
    finally:
        device.detach()
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    return anchors[x], anchors[loss], weights


@pytest.mark.slow
@pytest.mark.follows("test_global_batch_size_correctness_test")
@pytest.mark.parametrize(
    "optim,reduction_type,batchserial,explicit_loops",
    [
        ("SGDM1", "MeanRunning", "Loop", True),
        ("ADAM", "Sum", "Unroll", False),
    ],
)
def test_global_batch_size_correctness_test(
    tmp_path, optim, reduction_type, batchserial, explicit_loops
):
    baseline_x, baseline_loss, baseline_weights = _run(
        tmp_path, optim, reduction_type, batchserial, False, (16, 1, 1, 1)
    )
    loss_fn = np.sum if reduction_type == "Sum" else np.mean
    for split in [(4, 1, 1, 4), (4, 1, 4, 1), (4, 4, 1, 1), (2, 2, 2, 2)]:
        x, loss, weights = _run(tmp_path, optim, reduction_type, batchserial, explicit_loops, split)
        np.testing.assert_allclose(x.flatten(), baseline_x.flatten(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(loss_fn(loss), loss_fn(baseline_loss), rtol=1e-5, atol=1e-5)
        for name, expected in baseline_weights.items():
            if "Step" in name:
                continue
            np.testing.assert_allclose(weights[name], expected, rtol=1e-5, atol=1e-5)
