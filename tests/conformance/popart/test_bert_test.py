"""graphcore/popart tests/integration/bert_test.py: a pipelined (three stages on two IPUs,
pipeline recomputation, gradient accumulation of 8, stochastic rounding, half partials,
synthetic random-normal data) training step of a BERT mixture-of-experts router: a linear
layer and softmax whose top-1 choice (argmax, one-hot) gives a balancing loss, in fp16 or
fp32, with or without a weighted final loss. With one expert the router's probabilities
and its assignments are all 1, so each layer's balancing loss is 1 for every micro batch:
its SUM anchor over the step's 8 micro batches is 8. The original only checks that the
step runs (with synthetic data nothing is streamed to the host, anchors included); here one
combination also runs with real data and checks the anchors. The original runs it on an
IPU Model; here on one."""

import numpy as np
import pytest

import popart

ACCUMULATION = 8


def _router_loss(builder, hiddens, force_fp32: bool):
    dtype = np.float32 if force_fp32 else np.float16
    type_name = "FLOAT" if force_fp32 else "FLOAT16"
    onnx = builder.aiOnnx
    w = builder.addInitializedInputTensor(np.random.normal(size=(8, 1)).astype(dtype), "W")
    b = builder.addInitializedInputTensor(np.random.normal(size=(1,)).astype(dtype), "b")
    if force_fp32:
        hiddens = onnx.cast([hiddens], to=type_name)
    logits = onnx.add([onnx.matmul([hiddens, w]), b])
    probs = onnx.softmax([logits], axis=1)
    assignments = onnx.argmax([logits], axis=-1, keepdims=0)
    depth = onnx.constant(np.array(1, np.int32))
    values = onnx.constant(np.array([0, 1], np.int32))
    mask = onnx.cast([onnx.onehot([assignments, depth, values])], to=type_name)
    density = onnx.reducemean([mask], axes=[0], keepdims=0)
    density_proxy = onnx.reducemean([probs], axes=[0], keepdims=0)
    loss = onnx.reducemean([onnx.mul([density, density_proxy])], axes=[0], keepdims=0)
    loss = onnx.mul([loss, onnx.constant(np.array(1.0, dtype))])
    return onnx.cast([loss], to="FLOAT16") if force_fp32 else loss


def _train_step(force_fp32: bool, weight_final_loss: bool, synthetic_data):
    np.random.seed(0)
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT16", [64, 8]), "input_x")
    aux_losses = []
    for stage in range(2):
        with builder.pipelineStage(stage), builder.virtualGraph(stage), builder.nameScope("FF"):
            aux_losses.append(_router_loss(builder, x, force_fp32))
            x = builder.aiOnnx.add([x, x])
    with builder.pipelineStage(2), builder.virtualGraph(0), builder.nameScope("FinalAuxLoss"):
        final_loss = builder.aiOnnx.sum(aux_losses, "AuxLoss")
        if weight_final_loss:
            weight = builder.aiOnnx.constant(np.array(1.0, np.float16))
            final_loss = builder.aiOnnx.mul([weight, final_loss])

    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.enableStochasticRounding = True
    options.partialsTypeMatMuls = "half"
    options.convolutionOptions = {"partialsType": "half"}
    options.enablePipelining = True
    options.autoRecomputation = popart.RecomputationType.Pipeline
    options.enableGradientAccumulation = True
    options.accumulationFactor = ACCUMULATION
    options.syntheticDataMode = synthetic_data
    device = popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": 2, "tilesPerIPU": 4, "ipuVersion": "ipu2"}
    )
    with device:
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            loss=final_loss,
            deviceInfo=device,
            optimizer=popart.ConstSGD(0.01),
            dataFlow=popart.DataFlow(1, {t: popart.AnchorReturnType("SUM") for t in aux_losses}),
            patterns=popart.Patterns(),
            userOptions=options,
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        data = {"input_x": np.random.rand(ACCUMULATION, 64, 8).astype(np.float16)}
        session.run(popart.PyStepIO(data, anchors))
    return [anchors[loss] for loss in aux_losses]


@pytest.mark.slow
@pytest.mark.follows("test_bert_test")
@pytest.mark.parametrize("force_fp32", [True, False])
@pytest.mark.parametrize("weight_final_loss", [True, False])
def test_bert_test(force_fp32, weight_final_loss):
    losses = _train_step(force_fp32, weight_final_loss, popart.SyntheticDataMode.RandomNormal)
    assert [(a.shape, a.dtype) for a in losses] == [((), np.float16)] * 2
    if force_fp32 and weight_final_loss:
        losses = _train_step(force_fp32, weight_final_loss, popart.SyntheticDataMode.Off)
        np.testing.assert_allclose(losses, [ACCUMULATION] * 2)
