"""graphcore/popart tests/integration/outlining_test.py: training a chain of MatMuls with
outlining on gives the weights and gradients it gives with outlining off (one step, and two
batches per step), for both subgraph-copying strategies; an inference model whose Call'd
subgraph repeats main-graph ops computes numpy's result, outlining moves the repeated
MatMul into a third graph called twice, and the debug info of those Calls names the ops they
replaced and outlined (Cpu)."""

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from popart_ir_checks import ir_of, op_types

import popart

DSIZE = 10
STRATEGIES = [
    popart.SubgraphCopyingStrategy.OnEnterAndExit,
    popart.SubgraphCopyingStrategy.JustInTime,
]


def _chain_session(enable_outlining, strategy, batches_per_step):
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [DSIZE, DSIZE]))
    x = ip
    layers = [ip]
    for _ in range(3):
        w = builder.addInitializedInputTensor(np.ones([DSIZE, DSIZE], np.float32))
        x = builder.aiOnnx.matmul([x, w])
        layers.append(x)
    out = builder.aiGraphcore.identityloss([x])
    builder.addOutputTensor(out)
    anchors = [popart.reservedGradientPrefix() + t for t in layers]
    opts = popart.SessionOptions()
    opts.enableOutlining = enable_outlining
    opts.separateCallOpPdfs = False
    opts.subgraphCopyingStrategy = strategy
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(
            batches_per_step, {a: popart.AnchorReturnType("All") for a in anchors}
        ),
        optimizer=popart.ConstSGD(0.1),
        loss=out,
        patterns=popart.Patterns(popart.PatternsLevel.All),
        userOptions=opts,
        deviceInfo=popart.DeviceManager().createCpuDevice(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    arrays = session.initAnchorArrays()
    shape = (DSIZE, DSIZE) if batches_per_step == 1 else (batches_per_step, DSIZE, DSIZE)
    session.run(popart.PyStepIO({ip: np.ones(shape, np.float32)}, arrays))
    return session, arrays, anchors


def _numpy_chain_step():
    """numpy's gradients of the mean of ones @ W1 @ W2 @ W3 (all ones), and the weights after
    an SGD step of 0.1."""
    ip = np.ones([DSIZE, DSIZE], np.float32)
    weights = [np.ones([DSIZE, DSIZE], np.float32) for _ in range(3)]
    layers = [ip]
    for w in weights:
        layers.append(layers[-1] @ w)
    grads = [np.full([DSIZE, DSIZE], 1.0 / DSIZE**2, np.float32)]
    weight_grads = []
    for i in reversed(range(3)):
        weight_grads.insert(0, layers[i].T @ grads[0])
        grads.insert(0, grads[0] @ weights[i].T)
    return grads, [w - 0.1 * g for w, g in zip(weights, weight_grads, strict=True)]


@pytest.mark.follows("test_weight_update")
@pytest.mark.parametrize("subgraphCopyingStrategy", STRATEGIES)
def test_weight_update(tmpdir, subgraphCopyingStrategy):
    models = []
    for enable_outlining in (False, True):
        session, _, _ = _chain_session(enable_outlining, subgraphCopyingStrategy, 1)
        path = str(tmpdir / f"outlining_{enable_outlining}.onnx")
        session.modelToHost(path)
        models.append(onnx.load(path))
    _, expected = _numpy_chain_step()
    without, with_ = (
        [numpy_helper.to_array(t) for t in model.graph.initializer] for model in models
    )
    assert len(without) == len(with_) == 3
    for lhs, rhs, ref in zip(without, with_, expected, strict=True):
        np.testing.assert_allclose(lhs, rhs)
        np.testing.assert_allclose(lhs, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.follows("test_batches_per_step_greater_than_one")
@pytest.mark.parametrize("subgraphCopyingStrategy", STRATEGIES)
def test_batches_per_step_greater_than_one(subgraphCopyingStrategy):
    _, without, anchors = _chain_session(False, subgraphCopyingStrategy, 2)
    _, with_, _ = _chain_session(True, subgraphCopyingStrategy, 2)
    grads, _ = _numpy_chain_step()
    for anchor, first_batch_grad in zip(anchors, grads, strict=True):
        np.testing.assert_allclose(without[anchor], with_[anchor])
        np.testing.assert_allclose(without[anchor][0], first_batch_grad, rtol=1e-5)


@pytest.mark.follows("test_outlining_in_subgraphs")
@pytest.mark.parametrize("subgraphCopyingStrategy", STRATEGIES)
def test_outlining_in_subgraphs(subgraphCopyingStrategy, tmpdir):
    data = [np.random.rand(4, 4).astype(np.float32) for _ in range(2)]
    weights = [np.random.rand(4, 4).astype(np.float32) for _ in range(2)]
    bld = popart.Builder()
    i0 = bld.addInputTensor("FLOAT", [4, 4])
    i1 = bld.addInputTensor("FLOAT", [4, 4])
    w0 = bld.addInitializedInputTensor(weights[0])
    w1 = bld.addInitializedInputTensor(weights[1])
    x = bld.aiOnnx.add([bld.aiOnnx.matmul([bld.aiOnnx.add([i0, i1]), w0]), i1])
    sub = bld.createSubgraphBuilder()
    info = popart.TensorInfo("FLOAT", [4, 4])
    s0, s1, s2 = (sub.addInputTensor(info) for _ in range(3))
    sub.addOutputTensor(sub.aiOnnx.matmul([sub.aiOnnx.add([s0, s1]), s2]))
    o = bld.aiGraphcore.call([x, i1, w1], 1, sub)[0]
    opts = popart.SessionOptions()
    opts.subgraphCopyingStrategy = subgraphCopyingStrategy
    debug_filename = str(tmpdir / "debug.json")
    popart.initializePoplarDebugInfo(debug_filename, "json")
    session = popart.InferenceSession(
        fnModel=bld.getModelProto(),
        deviceInfo=popart.DeviceManager().createCpuDevice(),
        dataFlow=popart.DataFlow(1, [o]),
        userOptions=opts,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.weightsFromHost()
    session.run(popart.PyStepIO({i0: data[0], i1: data[1]}, anchors))
    ir = ir_of(session)
    popart.closePoplarDebugInfo()
    reference = ((data[0] + data[1]) @ weights[0] + data[1] + data[1]) @ weights[1]
    np.testing.assert_allclose(anchors[o], reference, rtol=1e-5)
    ops = [t for graph in ir.values() for t in op_types(graph)]
    assert len(ir) == 3
    assert ops.count("MatMul") == 1
    assert ops.count("Call") == 3
    with open(debug_filename, encoding="utf-8") as json_file:
        contexts = json.load(json_file)["contexts"]
    outlined = [
        c
        for c in contexts
        if c["layer"] == "popart" and c.get("attributes", {}).get("callee") == "call_subgraph(0)"
    ]
    assert len(outlined) == 2
    for context in outlined:
        # Id lists written as text ("[5,6]"): as many outlined ops as replaced ones.
        outlined_ids = json.loads(context["outlinedDebugContextIds"])
        replaced_ids = json.loads(context["replacedDebugContextIds"])
        assert len(outlined_ids) == len(replaced_ids) > 0
