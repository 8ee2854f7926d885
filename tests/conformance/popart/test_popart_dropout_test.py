"""graphcore/popart tests/integration/operators_test/dropout_test.py: Dropout is the
identity in inference and with ratio 0, scales kept elements by 1/(1-ratio) and returns its
mask in training, drops about `ratio` of the elements, passes gradient only where it kept,
draws a new mask per run, per batch, per op and per replica, repeats it under one seed, and
refuses a ratio outside [0, 1). The original runs the random ones on IPU hardware; here they
run on emulated IPUs."""

import itertools

import numpy as np
import pytest

import popart


def _device(num_ipus=1):
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": num_ipus, "tilesPerIPU": 4})


def _session(anchor_ids, proto, loss, bps=1, seed=0, options=None, num_ipus=1):
    session = popart.TrainingSession(
        fnModel=proto,
        dataFlow=popart.DataFlow(bps, {a: popart.AnchorReturnType("All") for a in anchor_ids}),
        optimizer=popart.ConstSGD(0.1),
        loss=loss,
        patterns=popart.Patterns(popart.PatternsLevel.All),
        userOptions=options or popart.SessionOptions(),
        deviceInfo=_device(num_ipus),
    )
    session.prepareDevice()
    session.setRandomSeed(seed)
    session.weightsFromHost()
    return session, session.initAnchorArrays()


def _dropout_session(dsize=100, ratio=0.2, bps=1, replicas=1):
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [dsize]))
    d__ip = popart.reservedGradientPrefix() + ip
    [out] = builder.aiOnnx.dropout([ip], num_outputs=1, ratio=ratio)
    loss = builder.aiGraphcore.identityloss([out])
    builder.addOutputTensor(loss)
    options = popart.SessionOptions()
    if replicas > 1:
        options.enableReplicatedGraphs = True
        options.replicatedGraphCount = replicas
    session, anchors = _session(
        [out, ip, d__ip], builder.getModelProto(), loss, bps, options=options, num_ipus=replicas
    )
    return session, ip, out, d__ip, anchors


@pytest.mark.follows("test_dropout_testing")
def test_dropout_testing(op_tester):
    d1 = np.random.rand(2).astype(np.float32)

    def init_builder(builder):
        (o,) = builder.aiOnnx.dropout([builder.addInputTensor(d1)], 1, 0.5, "test_dropout")
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [d1], "infer")
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d1], "infer")


@pytest.mark.follows("test_dropout_ratio0_testing")
def test_dropout_ratio0_testing(op_tester):
    d1 = np.random.rand(2).astype(np.float32)

    def init_builder(builder):
        (o,) = builder.aiOnnx.dropout([builder.addInputTensor(d1)], 1, 0.0, "test_dropout")
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [d1], "train")
    op_tester.setPatterns(["OpToIdentity"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [d1], "train")


@pytest.mark.follows("test_dropout_training1")
def test_dropout_training1():
    dsize, ratio = 10, 0.2
    d1 = np.random.rand(dsize).astype(np.float32)
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [dsize]))
    [o1, o2] = builder.aiOnnx.dropout([ip], num_outputs=2, ratio=ratio)
    out = builder.aiGraphcore.identityloss([o1])
    builder.addOutputTensor(o1)
    builder.addOutputTensor(o2)
    anchor_ids = [o1, o2, ip, popart.reservedGradientPrefix() + ip]
    session, anchors = _session(anchor_ids, builder.getModelProto(), out)
    session.run(popart.PyStepIO({ip: d1}, anchors))
    np.testing.assert_allclose(anchors[o1], d1 * anchors[o2] / (1 - ratio), rtol=1e-6)


@pytest.mark.follows("test_dropout_training3")
def test_dropout_training3():
    dsize, ratio = 10000, 0.2
    session, ip, out, _, anchors = _dropout_session(dsize=dsize, ratio=ratio)
    ip_data = np.random.random_sample(dsize).astype(np.float32) + 1
    session.run(popart.PyStepIO({ip: ip_data}, anchors))
    kept = anchors[out] != 0
    np.testing.assert_allclose(anchors[out][kept], ip_data[kept] / (1 - ratio), rtol=1e-6)
    assert np.isclose(np.count_nonzero(kept) / dsize, 1 - ratio, atol=0.05)


@pytest.mark.follows("test_dropout_training4")
def test_dropout_training4():
    dsize, ratio = 10, 0.2
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [dsize, dsize]))
    d__ip = popart.reservedGradientPrefix() + ip
    [d1] = builder.aiOnnx.dropout([ip], num_outputs=1, ratio=ratio)
    w = builder.addInitializedInputTensor(np.ones([dsize, dsize], np.float32))
    out = builder.aiGraphcore.identityloss([builder.aiOnnx.matmul([d1, w])])
    builder.addOutputTensor(out)
    session, anchors = _session([d1, d__ip], builder.getModelProto(), out)
    ip_data = np.random.random_sample((dsize, dsize)).astype(np.float32) + 1
    session.run(popart.PyStepIO({ip: ip_data}, anchors))
    # The gradient flows exactly where the forward pass kept the element.
    np.testing.assert_array_equal(anchors[d1] == 0, anchors[d__ip] == 0)
    assert (anchors[d1] == 0).any() and (anchors[d1] != 0).any()


@pytest.mark.follows("test_dropout_training_randomness")
def test_dropout_training_randomness():
    session, ip, out, _, anchors = _dropout_session()
    stepio = popart.PyStepIO({ip: np.random.random_sample(100).astype(np.float32)}, anchors)
    session.setRandomSeed(0)
    session.run(stepio)
    first = np.copy(anchors[out])
    session.run(stepio)
    assert not np.array_equal(first, anchors[out])


@pytest.mark.follows("test_dropout_training_set_seed")
def test_dropout_training_set_seed():
    session, ip, out, _, anchors = _dropout_session()
    stepio = popart.PyStepIO({ip: np.random.random_sample(100).astype(np.float32)}, anchors)
    session.setRandomSeed(7)
    session.run(stepio)
    first = np.copy(anchors[out])
    session.setRandomSeed(7)
    session.run(stepio)
    np.testing.assert_array_equal(first, anchors[out])


@pytest.mark.follows("test_dropout_training6")
def test_dropout_training6():
    session, ip, out, _, anchors = _dropout_session(bps=2)
    ip_data = np.array([np.random.random_sample(100).astype(np.float32)] * 2)
    session.run(popart.PyStepIO({ip: ip_data}, anchors))
    assert not np.array_equal(anchors[out][0], anchors[out][1])


@pytest.mark.follows("test_dropout_training7")
def test_dropout_training7():
    builder = popart.Builder()
    ip = builder.addInputTensor(popart.TensorInfo("FLOAT", [100]))
    [d1] = builder.aiOnnx.dropout([ip], num_outputs=1, ratio=0.2)
    [d2] = builder.aiOnnx.dropout([ip], num_outputs=1, ratio=0.2)
    out = builder.aiGraphcore.identityloss([builder.aiOnnx.add([d1, d2])])
    builder.addOutputTensor(out)
    session, anchors = _session([d1, d2], builder.getModelProto(), out)
    session.run(popart.PyStepIO({ip: np.random.random_sample(100).astype(np.float32)}, anchors))
    assert not np.array_equal(anchors[d1], anchors[d2])


@pytest.mark.follows("test_dropout_training8")
def test_dropout_training8(op_tester):
    d1 = np.random.rand(10).astype(np.float32)
    ratio = 100 * np.random.rand(1)[0] + 1

    def init_builder(builder):
        i1 = builder.addInputTensor(d1)
        [o1] = builder.aiOnnx.dropout([i1], num_outputs=1, ratio=ratio)
        builder.addOutputTensor(o1)
        return [o1, popart.reservedGradientPrefix() + i1]

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [d1, d1], "train")
    assert e_info.value.args[0].endswith("Please use a value in the interval [0,1)")


def _per_replica(replicas=4, dsize=10, bps=1):
    return _dropout_session(dsize=dsize, ratio=0.3, bps=bps, replicas=replicas)


@pytest.mark.follows("test_dropout_training_replicated")
def test_dropout_training_replicated():
    session, ip, out, _, anchors = _per_replica()
    session.run(popart.PyStepIO({ip: np.ones([4, 10], np.float32)}, anchors))
    for a, b in itertools.combinations(range(4), 2):
        assert not np.allclose(anchors[out][a], anchors[out][b])


@pytest.mark.follows("test_dropout_training_replicated_repeatable")
def test_dropout_training_replicated_repeatable():
    session, ip, out, d__ip, anchors = _per_replica()
    stepio = popart.PyStepIO({ip: np.ones([4, 10], np.float32)}, anchors)
    session.setRandomSeed(7)
    session.run(stepio)
    ref_out, ref_d__ip = np.copy(anchors[out]), np.copy(anchors[d__ip])
    session.run(stepio)
    assert not np.array_equal(ref_out, anchors[out])
    assert not np.array_equal(ref_d__ip, anchors[d__ip])
    session.setRandomSeed(7)
    session.run(stepio)
    np.testing.assert_array_equal(ref_out, anchors[out])
    np.testing.assert_array_equal(ref_d__ip, anchors[d__ip])


@pytest.mark.follows("test_replicated_with_multiple_batches_per_step")
def test_replicated_with_multiple_batches_per_step():
    session, ip, out, _, anchors = _per_replica(dsize=100, bps=2)
    stepio = popart.PyStepIO({ip: np.ones([2, 4, 100], np.float32)}, anchors)
    session.run(stepio)
    session.run(stepio)
    micro_batches = [anchors[out][b][r] for b in range(2) for r in range(4)]
    for a, b in itertools.combinations(micro_batches, 2):
        assert not np.allclose(a, b)
