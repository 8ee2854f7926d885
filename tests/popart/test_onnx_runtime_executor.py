"""Inference sessions on onnxruntime: the same anchors as the TensorFlow lowering and numpy.

An InferenceSession runs models whose every op means the same to onnxruntime on the faster
of its two executors; `OPENIPU_COMPILE=onnxruntime` makes it onnxruntime (no timing), so
these programs check that executor's results whatever the machine's speed.
"""

from __future__ import annotations

import numpy as np
import pytest

import popart

ART = popart.AnchorReturnType


@pytest.fixture
def onnx_runtime(monkeypatch):
    monkeypatch.setenv("OPENIPU_COMPILE", "onnxruntime")


def mlp():
    rng = np.random.default_rng(3)
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
    w1_value = rng.normal(size=(8, 16)).astype(np.float32)
    w2_value = rng.normal(size=(16, 3)).astype(np.float32)
    w1 = builder.addInitializedInputTensor(w1_value, "w1")
    w2 = builder.addInitializedInputTensor(w2_value, "w2")
    hidden = builder.aiOnnx.relu([builder.aiOnnx.matmul([x, w1])])
    y = builder.aiOnnx.softmax([builder.aiOnnx.matmul([hidden, w2])], axis=1)
    builder.addOutputTensor(y)
    return builder.getModelProto(), x, hidden, y, w1_value, w2_value


def numpy_mlp(x, w1, w2):
    hidden = np.maximum(x @ w1, 0)
    logits = hidden @ w2
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return hidden, e / e.sum(-1, keepdims=True)


def session_on(proto, anchors, batches_per_step, replicas=1):
    options = popart.SessionOptions()
    options.constantWeights = False  # writeWeights may change them
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": replicas})
    if replicas > 1:
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = replicas
    session = popart.InferenceSession(
        proto, popart.DataFlow(batches_per_step, anchors), device, userOptions=options
    )
    session.prepareDevice()
    session.weightsFromHost()
    return session


def test_an_mlp_runs_on_onnx_runtime_with_numpys_results(onnx_runtime):
    proto, x, hidden, y, w1, w2 = mlp()
    session = session_on(proto, {y: ART("ALL"), hidden: ART("FINAL")}, batches_per_step=3)
    assert "onnxruntime" in str(session.getReport())
    data = np.random.default_rng(0).normal(size=(3, 4, 8)).astype(np.float32)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: data}, anchors))
    expected_hidden, expected_y = numpy_mlp(data, w1, w2)
    np.testing.assert_allclose(anchors[y], expected_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(anchors[hidden], expected_hidden[-1], rtol=1e-5, atol=1e-5)


def test_new_weights_reach_onnx_runtime(onnx_runtime):
    # onnxruntime holds the weights as constants: writeWeights + weightsFromHost replace them.
    proto, x, _, y, w1, _ = mlp()
    session = session_on(proto, {y: ART("ALL")}, batches_per_step=1)
    w2 = np.ones((16, 3), np.float32) * np.arange(3, dtype=np.float32)
    session.writeWeights(popart.PyWeightsIO({"w2": w2}))
    session.weightsFromHost()
    data = np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_allclose(anchors[y], numpy_mlp(data, w1, w2)[1], rtol=1e-5, atol=1e-6)


def test_replicas_on_onnx_runtime_read_their_own_batches(onnx_runtime):
    proto, x, _, y, w1, w2 = mlp()
    session = session_on(proto, {y: ART("EVERYN", 2)}, batches_per_step=4, replicas=2)
    assert "2 replica(s)" in str(session.getReport())
    data = np.random.default_rng(2).normal(size=(4, 2, 4, 8)).astype(np.float32)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: data}, anchors))
    expected = numpy_mlp(data, w1, w2)[1]
    assert anchors[y].shape == (2, 2, 4, 3)  # [bps / 2, replicas, *shape]
    np.testing.assert_allclose(anchors[y], expected[1::2], rtol=1e-5, atol=1e-6)


def test_a_model_with_ops_popart_defines_differently_stays_on_the_lowering(onnx_runtime):
    # Gather's out-of-range indices follow PopART's rules, not onnxruntime's.
    builder = popart.Builder()
    table = builder.addInitializedInputTensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    indices = builder.addInputTensor(popart.TensorInfo("INT32", [2]), "indices")
    y = builder.aiOnnx.gather([table, indices], axis=0)
    builder.addOutputTensor(y)
    session = session_on(builder.getModelProto(), {y: ART("ALL")}, batches_per_step=1)
    assert "onnxruntime" not in str(session.getReport())
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({indices: np.array([3, 1], np.int32)}, anchors))
    np.testing.assert_array_equal(anchors[y], [[9, 10, 11], [3, 4, 5]])


def test_the_lowering_is_kept_when_forced(monkeypatch):
    monkeypatch.setenv("OPENIPU_COMPILE", "xla")
    proto, x, _, y, w1, w2 = mlp()
    session = session_on(proto, {y: ART("ALL")}, batches_per_step=2)
    assert "onnxruntime" not in str(session.getReport())
    data = np.random.default_rng(4).normal(size=(2, 4, 8)).astype(np.float32)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_allclose(anchors[y], numpy_mlp(data, w1, w2)[1], rtol=1e-5, atol=1e-6)


def test_a_calls_batches_run_as_one_batch_when_the_model_allows(onnx_runtime):
    # The MLP computes each sample on its own: its batch dimension is freed and the 3 x 2
    # batches of a call (steps x replicas) go to onnxruntime as one batch of 24 samples.
    proto, x, _, y, w1, w2 = mlp()
    session = session_on(proto, {y: ART("ALL")}, batches_per_step=3, replicas=2)
    assert session._onnx_runtime.batches_together
    data = np.random.default_rng(4).normal(size=(3, 2, 4, 8)).astype(np.float32)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_allclose(anchors[y], numpy_mlp(data, w1, w2)[1], rtol=1e-5, atol=1e-6)


def test_a_model_whose_shapes_fix_the_batch_runs_batch_by_batch(onnx_runtime):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 6]), "x")
    shape = builder.aiOnnx.constant(np.array([4, 2, 3], np.int64))
    y = builder.aiOnnx.relu([builder.aiOnnx.reshape([x, shape])])
    builder.addOutputTensor(y)
    session = session_on(builder.getModelProto(), {y: ART("ALL")}, batches_per_step=2)
    assert not session._onnx_runtime.batches_together
    data = np.random.default_rng(5).normal(size=(2, 4, 6)).astype(np.float32)
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_allclose(anchors[y], np.maximum(data.reshape(2, 4, 2, 3), 0))


# -- runs bound to a stepio's arrays (session/bound_run.py) ------------------------------------
# A serving loop writes new values into the same input arrays and runs the same PyStepIO:
# after the first run, the session binds onnxruntime to those arrays. Every run must still
# read the values of the moment and write every anchor.


@pytest.mark.parametrize("batches_per_step", [1, 3])  # batch by batch / all batches as one
@pytest.mark.parametrize("replicas", [1, 2])
def test_a_serving_loop_reads_the_values_written_into_its_arrays(
    onnx_runtime, batches_per_step, replicas
):
    proto, x, _, y, w1, w2 = mlp()
    session = session_on(proto, {y: ART("ALL")}, batches_per_step, replicas)
    anchors = session.initAnchorArrays()
    lead = [batches_per_step] * (batches_per_step > 1) + [replicas] * (replicas > 1)
    data = np.zeros([*lead, 4, 8], np.float32)
    stepio = popart.PyStepIO({x: data}, anchors)
    rng = np.random.default_rng(5)
    for _ in range(4):
        data[...] = rng.normal(size=data.shape)
        session.run(stepio)
        np.testing.assert_allclose(anchors[y], numpy_mlp(data, w1, w2)[1], rtol=1e-5, atol=1e-6)
    assert session._bound is not None  # noqa: SLF001 - the bound runs were the ones checked


def test_stepios_taking_turns_each_get_their_own_results(onnx_runtime):
    proto, x, _, y, w1, w2 = mlp()
    session = session_on(proto, {y: ART("ALL")}, batches_per_step=2)
    rng = np.random.default_rng(6)
    pairs = []
    for _ in range(2):
        data = rng.normal(size=(2, 4, 8)).astype(np.float32)
        anchors = session.initAnchorArrays()
        pairs.append((popart.PyStepIO({x: data}, anchors), data, anchors))
    for stepio, data, anchors in pairs * 3:
        anchors[y][...] = 0
        session.run(stepio)
        np.testing.assert_allclose(anchors[y], numpy_mlp(data, w1, w2)[1], rtol=1e-5, atol=1e-6)


def test_new_weights_reach_a_serving_loop(onnx_runtime):
    proto, x, _, y, w1, w2 = mlp()
    session = session_on(proto, {y: ART("ALL")}, batches_per_step=2)
    data = np.random.default_rng(7).normal(size=(2, 4, 8)).astype(np.float32)
    anchors = session.initAnchorArrays()
    stepio = popart.PyStepIO({x: data}, anchors)
    session.run(stepio)
    session.run(stepio)
    new_w2 = np.ones((16, 3), np.float32) * np.arange(3, dtype=np.float32)
    session.writeWeights(popart.PyWeightsIO({"w2": new_w2}))
    session.weightsFromHost()
    for _ in range(2):
        session.run(stepio)
        np.testing.assert_allclose(anchors[y], numpy_mlp(data, w1, new_w2)[1], rtol=1e-5, atol=1e-6)


def test_a_serving_loop_with_a_final_anchor_and_converted_inputs(onnx_runtime):
    # FINAL anchors and int64 data for an INT32 input (converted on reading) are not bound:
    # every run still reads the values of the moment.
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("INT32", [4, 8]), "x")
    w = np.random.default_rng(8).normal(size=(8, 3)).astype(np.float32)
    floats = builder.aiOnnx.cast([x], "FLOAT")
    y = builder.aiOnnx.matmul([floats, builder.addInitializedInputTensor(w)])
    builder.addOutputTensor(y)
    session = session_on(builder.getModelProto(), {y: ART("FINAL")}, batches_per_step=2)
    assert "onnxruntime" in str(session.getReport())
    data = np.zeros((2, 4, 8), np.int64)
    anchors = session.initAnchorArrays()
    stepio = popart.PyStepIO({x: data}, anchors)
    for step in range(3):
        data[...] = np.arange(64).reshape(2, 4, 8) * (step + 1)
        session.run(stepio)
        np.testing.assert_allclose(anchors[y], data[-1] @ w, rtol=1e-5)
