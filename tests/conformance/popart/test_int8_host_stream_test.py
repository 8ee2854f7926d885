"""graphcore/popart tests/integration/int8_host_stream_test.py: 8-bit integer tensors stream
to and from the device (cast to float16 there, scaled, cast back), arithmetic on them
uncast fails to compile (Poplar has no 8-bit integer Add), and they pass through a
recomputed, pipelined training step (stashed, copied between IPUs). The original runs them
on the IPU Model; here on emulated IPUs."""

import numpy as np
import pytest

import popart

TYPES = [("INT8", np.int8), ("UINT8", np.uint8)]


def _device(num_ipus=1):
    return popart.DeviceManager().createIpuModelDevice(
        {"numIPUs": num_ipus, "tilesPerIPU": 4, "ipuVersion": "ipu2"}
    )


@pytest.mark.follows("test_int8_hd_stream_then_cast_then_op_then_cast_then_int8_dh_stream")
@pytest.mark.parametrize("builder_type, np_type", TYPES)
def test_int8_hd_stream_then_cast_then_op_then_cast_then_int8_dh_stream(builder_type, np_type):
    host = np.array([1, 3], dtype=np_type)
    builder = popart.Builder()
    x = builder.addInputTensor(builder_type, list(host.shape))
    scaled = builder.aiGraphcore.scale([builder.aiOnnx.cast([x], "FLOAT16")], 5)
    out = builder.aiOnnx.cast([scaled], builder_type)
    with _device() as device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(), dataFlow=popart.DataFlow(1, [out]), deviceInfo=device
        )
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x: host}, anchors))
    assert anchors[out].dtype == np_type
    np.testing.assert_array_equal(anchors[out], host * 5)


@pytest.mark.follows("test_fail_stream_int8_no_cast_then_op")
@pytest.mark.parametrize("builder_type, np_type", TYPES)
def test_fail_stream_int8_no_cast_then_op(builder_type, np_type):
    builder = popart.Builder()
    info = popart.TensorInfo(builder_type, [2])
    i1, i2 = builder.addInputTensor(info), builder.addInputTensor(info)
    o = builder.aiOnnx.add([i1, i2])
    builder.addOutputTensor(o)
    final = popart.AnchorReturnType("Final")
    with _device() as device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {i1: final, i2: final, o: final}),
            deviceInfo=device,
        )
        with pytest.raises(popart.poplar_exception):
            session.prepareDevice()


@pytest.mark.follows("test_pipelining_recomp")
@pytest.mark.parametrize("builder_type, np_type", TYPES)
def test_pipelining_recomp(builder_type, np_type):
    batches = 5
    shape = [1, 2, 4, 4]
    rng = np.random.default_rng(5)
    w_data = rng.random(shape).astype(np.float16)
    x_data = (rng.random([batches, *shape]) * 4).astype(np_type)
    builder = popart.Builder()
    x8 = builder.addInputTensor(builder_type, shape, "x")
    w = builder.addInitializedInputTensor(w_data)
    with builder.virtualGraph(0), builder.pipelineStage(0):
        y = builder.aiOnnx.mul([builder.aiOnnx.cast([x8], "FLOAT16"), w])
        y = builder.aiOnnx.cast([y], builder_type)  # stashed, and copied to IPU 1
    with builder.virtualGraph(1), builder.pipelineStage(1):
        y = builder.aiOnnx.sqrt([builder.aiOnnx.cast([y], "FLOAT16")])
    with builder.virtualGraph(0), builder.pipelineStage(2):
        y = builder.aiOnnx.mul([w, y])
        loss = builder.aiGraphcore.identityloss([y])
        loss8 = builder.aiOnnx.cast([loss], builder_type)
        builder.addOutputTensor(loss8)
    opts = popart.SessionOptions()
    opts.virtualGraphMode = popart.VirtualGraphMode.Manual
    opts.enablePipelining = True
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = batches
    opts.accumulationAndReplicationReductionType = popart.ReductionType.Mean
    opts.decomposeGradSum = True
    opts.autoRecomputation = popart.RecomputationType.Pipeline
    opts.explicitRecomputation = False
    with _device(2) as device:
        session = popart.TrainingSession(
            deviceInfo=device,
            dataFlow=popart.DataFlow(1, [loss, w], popart.AnchorReturnType("Final")),
            fnModel=builder.getModelProto(),
            loss=loss,
            optimizer=popart.ConstSGD(0.1),
            userOptions=opts,
        )
        session.prepareDevice()
        session.weightsFromHost()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x8: x_data}, anchors))
    # The last micro-batch's loss: mean of w * sqrt(int(x * w)).
    last = x_data[-1].astype(np.float16)
    stashed = (last * w_data).astype(np_type).astype(np.float16)
    expected = np.mean(w_data * np.sqrt(stashed))
    np.testing.assert_allclose(anchors[loss], expected, rtol=1e-2)
