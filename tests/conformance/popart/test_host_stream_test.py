"""graphcore/popart tests/integration/streamingmemory_tests/host_stream_test.py: training with
`useHostCopyOps` (the host streams copied into the graph by HostLoad ops) gives the same
outputs, activations and losses as without, step after step: a small float16 classifier,
and a matmul model with one or several batches per step, replicated, and with seven
batches of one sample. The original runs them on the IPU Model (the replicated one on
hardware, and skips it as not working in PopART); here on emulated IPUs."""

import json

import numpy as np
import pytest

import popart


def _device(num_ipus=1):
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": num_ipus, "tilesPerIPU": 4})


def _classifier(host_copy_ops, device, w_init, bias_init, batches):
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT16", [8, 2]), "input_data")
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [8]), "label")
    w = builder.addInitializedInputTensor(w_init)
    b = builder.addInitializedInputTensor(bias_init)
    relu = builder.aiOnnx.relu([builder.aiOnnx.gemm([ip, w, b], 1.0, 1.0, False, False)])
    sm = builder.aiOnnx.softmax([relu])
    nll = builder.aiGraphcore.nllloss([sm, lb])
    builder.addOutputTensor(sm)
    opts = popart.SessionOptions()
    opts.useHostCopyOps = host_copy_ops
    art = popart.AnchorReturnType("All")
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(batches, {sm: art, nll: art}),
        loss=nll,
        optimizer=popart.ConstSGD(0.1),
        userOptions=opts,
        deviceInfo=device,
    )
    session.prepareDevice()
    return session, ip, lb, sm


@pytest.mark.follows("test_basic_host_load_output")
def test_basic_host_load_output():
    rng = np.random.default_rng(42)
    batches = 12
    data = rng.random((batches, 8, 2)).astype(np.float16)
    labels = rng.integers(0, 2, (batches, 8)).astype(np.int32)
    w_init = rng.random((2, 2)).astype(np.float16)
    bias_init = rng.random(2).astype(np.float16)
    runs = []
    with _device() as d1, _device() as d2:
        for host_copy_ops, device in ((False, d1), (True, d2)):
            session, ip, lb, sm = _classifier(host_copy_ops, device, w_init, bias_init, batches)
            anchors = session.initAnchorArrays()
            runs.append((session, popart.PyStepIO({ip: data, lb: labels}, anchors), anchors, sm))
        for _ in range(5):
            for session, stepio, _, _ in runs:
                session.weightsFromHost()
                session.run(stepio)
                session.weightsToHost()
            (_, _, plain, sm), (_, _, copied, _) = runs
            np.testing.assert_allclose(copied[sm], plain[sm])
            assert np.isfinite(plain[sm]).all()


@pytest.mark.follows("test_basic_host_load_output")
@pytest.mark.parametrize("host_copy_ops", [True, False])
def test_host_copy_ops_in_ir(host_copy_ops):
    rng = np.random.default_rng(0)
    with _device() as device:
        session, *_ = _classifier(
            host_copy_ops, device, rng.random((2, 2)).astype(np.float16),
            rng.random(2).astype(np.float16), 1,
        )  # fmt: skip
        ir = json.loads(session._serializeIr(popart.IrSerializationFormat.JSON))
    types = [op["type"] for op in ir["maingraph"]]
    # One of each per data input stream (the input and the labels), as the original's
    # check_ops, and none without host copy ops.
    expected = 2 if host_copy_ops else 0
    assert types.count("Init") == expected
    assert types.count("HostLoad") + types.count("HostLoadInplace") == expected


def _matmul_session(device, weights, batches, replicas, micro_batch, host_copy_ops):
    builder = popart.Builder()
    w = builder.addInitializedInputTensor(weights)
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", list(weights.shape)), "main_input_123")
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [micro_batch]), "label_input_456")
    a = builder.aiOnnx.matmul([ip, w])
    flat = builder.reshape_const(builder.aiOnnx, [a], [micro_batch, int(weights[0].size)])
    relu = builder.aiOnnx.relu([flat])
    sm = builder.aiOnnx.softmax([relu], axis=0, debugContext="output")
    builder.addOutputTensor(sm)
    loss = builder.aiGraphcore.nllloss([sm, lb], reduction=popart.ReductionType.Mean)
    art = popart.AnchorReturnType("All")
    opts = popart.SessionOptions()
    opts.useHostCopyOps = host_copy_ops
    if replicas > 1:
        opts.replicatedGraphCount = replicas
        opts.enableReplicatedGraphs = True
    patterns = (
        popart.Patterns(popart.PatternsLevel.Minimal)
        .enablePattern("MatMulLhsGradOp", True)
        .enablePattern("MatMulRhsGradOp", True)
    )
    patterns.InPlace = False
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(batches, {t: art for t in (ip, lb, loss, sm, a, relu)}),
        loss=loss,
        optimizer=popart.ConstSGD(0.1),
        userOptions=opts,
        deviceInfo=device,
        patterns=patterns,
    )
    session.prepareDevice()
    return session, (ip, relu, loss, a)


def _compare_host_copies(batches, replicas, batch_size, channels, size, steps):
    rng = np.random.default_rng(7)
    micro_batch = batch_size // replicas
    shape = [micro_batch, channels, size, size]
    weights = rng.random(shape).astype(np.float32)
    label_shape = [micro_batch]
    if replicas > 1:
        label_shape = [replicas, *label_shape]
    if batches > 1:
        label_shape = [batches, *label_shape]
    with _device(replicas) as d1, _device(replicas) as d2:
        with_copies = _matmul_session(d1, weights, batches, replicas, micro_batch, True)
        without = _matmul_session(d2, weights, batches, replicas, micro_batch, False)
        sessions = [(s, ids, s.initAnchorArrays()) for s, ids in (with_copies, without)]
        for _ in range(steps):
            data = (rng.random([batch_size * batches, channels, size, size]) + 1) * 10
            labels = rng.integers(0, channels * size * size, label_shape).astype(np.int32)
            outputs = []
            for session, ids, anchors in sessions:
                feed = {ids[0]: data.astype(np.float32), "label_input_456": labels}
                session.weightsFromHost()
                session.run(popart.PyStepIO(feed, anchors))
                session.weightsToHost()
                outputs.append([anchors[t].copy() for t in ids])
            for copied, plain in zip(*outputs, strict=True):
                assert np.isfinite(plain).all()
                np.testing.assert_allclose(copied, plain)


@pytest.mark.follows("test_host_load_simple")
def test_host_load_simple():
    _compare_host_copies(batches=1, replicas=1, batch_size=1, channels=3, size=4, steps=2)


@pytest.mark.follows("test_host_load_multi_bps")
def test_host_load_multi_bps():
    _compare_host_copies(batches=5, replicas=1, batch_size=4, channels=3, size=4, steps=2)


@pytest.mark.follows("test_host_load_replicated")
def test_host_load_replicated():
    _compare_host_copies(batches=7, replicas=2, batch_size=4, channels=3, size=2, steps=1)


@pytest.mark.follows("test_host_load_pipeline")
def test_host_load_pipeline():
    _compare_host_copies(batches=7, replicas=1, batch_size=1, channels=2, size=3, steps=1)
