"""graphcore/popart tests/integration/subgraph_tests/subgraph_regression_test.py: training
sessions whose loss reads a Call of a FLOAT16 subgraph build without error, whether the
gradient-sum op of a subgraph input is a subgraph output (PostNRepl must not remove it) or a
subgraph input has no gradient (an INT32 label). The original only builds them (on an IPU
Model); here each is also trained one step on the Cpu device, its updated weights checked
against numpy's."""

import numpy as np
import pytest

import popart


def _sgd():
    return popart.SGD({"defaultLearningRate": (0.1, False), "defaultWeightDecay": (0, True)})


def _session(builder, loss, device):
    return popart.TrainingSession(
        fnModel=builder.getModelProto(),
        loss=loss,
        deviceInfo=device,
        optimizer=_sgd(),
        dataFlow=popart.DataFlow(1, {}),
        userOptions=popart.SessionOptions(),
    )


def _train_one_step(builder, loss, inputs, expected_weights):
    _session(builder, loss, popart.DeviceManager().createIpuModelDevice({}))
    session = _session(builder, loss, popart.DeviceManager().createCpuDevice())
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO(inputs, session.initAnchorArrays()))
    weights = {"weights": np.ones([64, 64], np.float16)}
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO(weights))
    np.testing.assert_allclose(weights["weights"], expected_weights, rtol=1e-2, atol=1e-4)


@pytest.mark.follows("test_postnrepl_overzealous_elimination")
def test_postnrepl_overzealous_elimination():
    builder = popart.Builder()
    in0 = builder.addInputTensor(popart.TensorInfo("FLOAT16", [4, 32, 1, 64]), "in0")
    w = builder.addInitializedInputTensor(np.zeros([64, 64], np.float16), "weights")
    sub = builder.createSubgraphBuilder()
    sub.addInputTensorFromParentGraph(w)
    sub_in = sub.addInputTensor(popart.TensorInfo("FLOAT16", [4, 32, 16, 64]))
    sub.addOutputTensor(sub.aiOnnx.matmul([sub_in, w]))
    x = builder.aiGraphcore.call([w, in0], 1, sub)[0]
    loss = builder.aiGraphcore.l1loss([x], 1.0)
    # A zero MatMul output: the L1 loss's gradient (sign(0)) is 0, the weights stay zero.
    _train_one_step(
        builder, loss, {in0: np.ones([4, 32, 1, 64], np.float16)}, np.zeros([64, 64], np.float32)
    )


@pytest.mark.follows("test_incomplete_grad")
def test_incomplete_grad():
    builder = popart.Builder()
    data = builder.addInputTensor(popart.TensorInfo("FLOAT16", [4, 32, 1, 64]), "float16_input")
    labels = builder.addInputTensor(popart.TensorInfo("INT32", [4, 2]), "int32_input")
    weights = builder.addInitializedInputTensor(np.zeros([64, 64], np.float16), "weights")
    sub = builder.createSubgraphBuilder()
    sub.addInputTensorFromParentGraph(weights)
    sub_in = sub.addInputTensor(popart.TensorInfo("FLOAT16", [4, 32, 1, 64]))
    sub.addInputTensorFromParentGraph(labels)
    log_probs = sub.aiOnnx.logsoftmax([sub.aiOnnx.matmul([sub_in, weights])], axis=3)
    sub.addOutputTensor(sub.aiOnnx.gather([log_probs, labels], axis=3))
    out = builder.aiGraphcore.call([weights, data, labels], 1, sub)[0]
    loss = builder.aiGraphcore.l1loss([out], 1.0)
    x = np.ones([4, 32, 1, 64], np.float32)
    label_ids = np.zeros([4, 2], np.int32)
    _train_one_step(
        builder,
        loss,
        {data: x.astype(np.float16), labels: label_ids},
        _incomplete_grad_weights(x, label_ids),
    )


def _incomplete_grad_weights(x, label_ids):
    """numpy's SGD step (learning rate 0.1) from zero weights for the Call's loss: the mean
    L1 of log-softmax values gathered at the labels."""
    logits = x @ np.zeros([64, 64], np.float32)
    log_probs = logits - np.log(np.exp(logits).sum(axis=3, keepdims=True))
    gathered = np.take(log_probs, label_ids, axis=3)
    d_gathered = np.sign(gathered) / gathered.size
    d_log_probs = np.zeros_like(log_probs)
    for i, label in np.ndenumerate(label_ids):
        d_log_probs[..., label] += d_gathered[..., i[0], i[1]]
    softmax = np.exp(log_probs)
    d_logits = d_log_probs - softmax * d_log_probs.sum(axis=3, keepdims=True)
    d_weights = np.einsum("btok,btoj->kj", x, d_logits)
    return -0.1 * d_weights
