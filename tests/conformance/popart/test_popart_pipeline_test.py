"""graphcore/popart tests/integration/pipelining_tests/pipeline_test.py: pipelining's errors
(too few IPUs or virtual graphs off, too few batches to fill the pipeline, inconsistent or
partial stage annotations, stages inferred backwards through the IPUs, the forward-only
program's requirements), sessions it accepts (recomputation, one input streamed to several
IPUs, branched sharding, aliased copies), and that sharded and pipelined models give the
numbers of the same model on one IPU (inference, training, several stages per IPU,
recomputation, restored stashes) (IpuModel2)."""

import re
from collections import namedtuple

import numpy as np
import pytest
from popart_session_helpers import infer_on

import popart
from conftest import create_test_device

_DataType = namedtuple("_DataType", ["builder_type", "np_type"])
INPUT_TYPES = [_DataType("INT8", np.int8), _DataType("UINT8", np.uint8), None]


def _device(num_ipus=1):
    return create_test_device("IpuModel2", num_ipus)


def _simple_linear_model(stream_input_to_op1_and_op2=False):
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    d1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    op0 = builder.aiOnnx.sin([d0], "s0")
    op1 = builder.aiOnnx.mul([op0, d0 if stream_input_to_op1_and_op2 else d1])
    op2 = builder.aiOnnx.exp([op1], "e0")
    op3 = builder.aiOnnx.exp([op2], "e1")
    builder.addOutputTensor(op3)
    return builder, (d0, d1), (op0, op1, op2, op3)


def _pipelined_options(explicit=False):
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.enableExplicitIR(explicit)
    return options


def _run_inference(builder, anchors, options, num_ipus, bps, feed):
    return infer_on(_device(num_ipus), builder.getModelProto(), anchors, feed, options, bps)


@pytest.mark.follows("test_disabled_virtual_graphs")
def test_disabled_virtual_graphs():
    builder, _, outputs = _simple_linear_model()
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Off
    with pytest.raises(popart.popart_exception) as error:
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(10, [outputs[3]]),
            userOptions=options,
            deviceInfo=_device(),
        )
    assert error.value.args[0].startswith("Pipelining requires more than")


@pytest.mark.follows("test_one_ipu")
def test_one_ipu():
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    d1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    s0 = builder.aiOnnx.sin([d0], "s0")
    r0 = builder.aiOnnx.exp([d1], "r0")
    m0 = builder.aiOnnx.mul([s0, r0], "m0")
    builder.addOutputTensor(m0)
    for tensor, stage in ((s0, 0), (r0, 0), (m0, 1)):
        builder.pipelineStage(tensor, stage)
        builder.virtualGraph(tensor, 0)
    with pytest.raises(popart.popart_exception) as error:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(10, [m0]),
            userOptions=_pipelined_options(),
            deviceInfo=_device(1),
        )
        session.prepareDevice()
    assert error.value.args[0].startswith("Pipelining requires more than")


def _sharded_linear_model(stream_input_to_op1_and_op2=False):
    builder, inputs, outputs = _simple_linear_model(stream_input_to_op1_and_op2)
    for tensor, graph in zip(outputs, (0, 1, 1, 1), strict=True):
        builder.virtualGraph(tensor, graph)
    return builder, inputs, outputs


def _linear_reference(d0, d1):
    return np.exp(np.exp(np.sin(d0) * d1))


@pytest.mark.follows("test_enabled_recomputation")
def test_enabled_recomputation():
    builder, (d0, d1), outputs = _sharded_linear_model()
    options = _pipelined_options()
    options.autoRecomputation = popart.RecomputationType.Standard
    data = np.random.rand(10, 10).astype(np.float32)
    extra = np.random.rand(10, 10).astype(np.float32)
    anchors = _run_inference(builder, [outputs[3]], options, 2, 10, {d0: data, d1: extra})
    # (Beyond the original, which only creates the session) numpy's answer.
    np.testing.assert_allclose(anchors[outputs[3]], _linear_reference(data, extra), rtol=1e-5)


@pytest.mark.follows("test_stream_tensors_to_multiple_ipus")
@pytest.mark.parametrize("explicit", [False, True])
def test_stream_tensors_to_multiple_ipus(explicit):
    # The input streamed to ops on IPUs 0 and 1 is accepted (copied across, not refused).
    builder, (d0, d1), outputs = _sharded_linear_model(stream_input_to_op1_and_op2=True)
    data = np.random.rand(10, 10).astype(np.float32)
    feed = {d0: data, d1: np.zeros_like(data)}  # d1 is an input of the model, but unused
    anchors = _run_inference(builder, [outputs[3]], _pipelined_options(explicit), 2, 10, feed)
    np.testing.assert_allclose(anchors[outputs[3]], _linear_reference(data, data), rtol=1e-5)


@pytest.mark.follows("test_sharding_multi_source")
def test_sharding_multi_source():
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    d1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    l0 = builder.addInputTensor(popart.TensorInfo("INT32", []))
    s0 = builder.aiOnnx.sin([d0], "s0")
    r0 = builder.aiOnnx.exp([d1], "r0")
    m0 = builder.aiOnnx.mul([s0, r0], "m0")
    nll = builder.aiGraphcore.nllloss([m0, l0])
    for tensor, graph in ((s0, 0), (r0, 1), (m0, 2), (nll, 2)):
        builder.virtualGraph(tensor, graph)
    device = _device(3)
    try:
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(10, [m0]),
            userOptions=_pipelined_options(),
            deviceInfo=device,
        )
    finally:
        device.detach()


# The original's model (three IPUs): d0 -> Sin | Exp, Conv(w0) | Reshape, Softmax, NllLoss.
def _model_anchors(
    sharded,
    pipelined,
    bps,
    training,
    prepare=True,
    restored=False,
    input_type=None,
):
    np.random.seed(1)
    builder = popart.Builder()
    batch = 2
    shape_d0, shape_l0 = [batch, 2, 4, 4], [batch]
    data_type = "FLOAT" if input_type is None else input_type.builder_type
    d0 = builder.addInputTensor(popart.TensorInfo(data_type, shape_d0))
    w0 = builder.addInitializedInputTensor(np.ones([2, 2, 3, 3], np.float32))
    l0 = builder.addInputTensor(popart.TensorInfo("INT32", shape_l0))
    d0_cast = d0 if input_type is None else builder.aiOnnx.cast([d0], "FLOAT")
    s0 = builder.aiOnnx.sin([d0_cast], "s0")
    e0 = builder.aiOnnx.exp([s0], "e0")
    c0 = builder.aiOnnx.conv(
        [e0, w0], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1], debugContext="c0"
    )
    r0 = builder.reshape_const(builder.aiOnnx, [c0], [batch, 32])
    out = builder.aiOnnx.softmax([r0], axis=1, debugContext="sfm")
    nll = builder.aiGraphcore.nllloss([out, l0])
    art = popart.AnchorReturnType("All")
    anchor_map = {nll: art, w0: art, e0: art}
    if training:
        anchor_map[popart.reservedGradientPrefix() + d0_cast] = art
        if pipelined and restored:
            anchor_map[popart.reservedRestoredPrefix() + e0] = art
            anchor_map[d0_cast] = art
            anchor_map[popart.reservedRestoredPrefix() + d0_cast] = art
    options = popart.SessionOptions()
    options.enablePipelining = pipelined
    num_ipus = 1
    if sharded:
        options.virtualGraphMode = popart.VirtualGraphMode.Manual
        num_ipus = 3
        if input_type is not None:
            builder.virtualGraph(d0_cast, 0)
        for tensor, graph in ((s0, 0), (e0, 1), (c0, 1), (r0, 2), (out, 2), (nll, 2)):
            builder.virtualGraph(tensor, graph)
    device = _device(num_ipus)
    try:
        flow = popart.DataFlow(bps, anchor_map)
        if training:
            session = popart.TrainingSession(
                fnModel=builder.getModelProto(),
                dataFlow=flow,
                loss=nll,
                optimizer=popart.ConstSGD(0.01),
                userOptions=options,
                deviceInfo=device,
            )
        else:
            session = popart.InferenceSession(
                fnModel=builder.getModelProto(),
                dataFlow=flow,
                userOptions=options,
                deviceInfo=device,
            )
        if not prepare:
            return None
        anchors = session.initAnchorArrays()
        session.prepareDevice()
        host_type = np.float32 if input_type is None else input_type.np_type
        data = np.random.uniform(-10.0, 10.0, [bps, *shape_d0]).astype(host_type)
        label = np.random.randint(0, 16, [bps, *shape_l0]).astype(np.int32)
        session.weightsFromHost()
        session.run(popart.PyStepIO({d0: data, l0: label}, anchors))
    finally:
        device.detach()
    anchors["input_raw"] = data
    anchors["label_raw"] = label
    anchors["ids"] = (d0_cast, e0, nll, w0)
    return anchors


def _reference_forward(data, label):
    """numpy's Sin, Exp, Conv with ones, Softmax and NllLoss (mean) of one batch; the loss
    takes log(max(p, 1e-7)), as PopART's Nll (willow/src/popx/op/nllx.cpp)."""
    e0 = np.exp(np.sin(data.astype(np.float32)))
    padded = np.pad(e0, [(0, 0), (0, 0), (1, 1), (1, 1)])
    # Every output channel sums the 3x3 windows of both input channels (weights of ones).
    window = sum(padded[:, :, i : i + 4, j : j + 4] for i in range(3) for j in range(3))
    conv = np.repeat(window.sum(axis=1, keepdims=True), 2, axis=1).reshape(2, 32)
    probs = np.exp(conv - conv.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    return e0, -np.mean(np.log(np.maximum(probs[np.arange(2), label], 1e-7)))


@pytest.mark.follows("test_inference_min_batches")
def test_inference_min_batches():
    _model_anchors(sharded=True, pipelined=True, bps=3, training=False, prepare=False)
    with pytest.raises(popart.popart_exception) as error:
        _model_anchors(sharded=True, pipelined=True, bps=2, training=False, prepare=False)
    assert error.value.args[0].startswith("For pipelining, depth (batchesPerStep) must")


@pytest.mark.follows("test_training_min_batches")
def test_training_min_batches():
    # Three forward stages and two backward ones: 2 * (3 - 1) + 1.
    _model_anchors(sharded=True, pipelined=True, bps=5, training=True, prepare=False)
    with pytest.raises(popart.popart_exception) as error:
        _model_anchors(sharded=True, pipelined=True, bps=4, training=True, prepare=False)
    assert error.value.args[0].startswith("For pipelining, depth (batchesPerStep) must")


def _items(anchors):
    return [(k, v) for k, v in anchors.items() if k not in ("input_raw", "label_raw", "ids")]


@pytest.mark.follows("test_output_matches_train")
@pytest.mark.parametrize("input_type", INPUT_TYPES)
def test_output_matches_train(input_type):
    single = _model_anchors(False, False, 5, True, input_type=input_type)
    sharded = _model_anchors(True, False, 5, True, input_type=input_type)
    pipelined = _model_anchors(True, True, 5, True, input_type=input_type)
    for (_, t1), (_, t2) in zip(_items(single), _items(sharded), strict=True):
        np.testing.assert_allclose(t1, t2, rtol=1e-5, atol=1e-6)
    # The original expects only the first batch to agree (continuous pipelining updates the
    # weights with stale gradients); the emulation runs each batch's stages in order, so
    # every batch agrees.
    for (_, t1), (_, t2) in zip(_items(single), _items(pipelined), strict=True):
        np.testing.assert_allclose(t1[0], t2[0], rtol=1e-5, atol=1e-6)
    _, e0, nll, _ = single["ids"]
    expected_e0, expected_loss = _reference_forward(single["input_raw"][0], single["label_raw"][0])
    np.testing.assert_allclose(pipelined[e0][0], expected_e0, rtol=1e-5)
    np.testing.assert_allclose(pipelined[nll][0], expected_loss, rtol=1e-4)


@pytest.mark.follows("test_acts_match_restored_acts")
@pytest.mark.parametrize("input_type", INPUT_TYPES)
def test_acts_match_restored_acts(input_type):
    anchors = _model_anchors(True, True, 5, True, restored=True, input_type=input_type)
    d0_cast, e0, _, _ = anchors["ids"]
    restored = popart.reservedRestoredPrefix()
    np.testing.assert_allclose(anchors[restored + e0], anchors[e0])
    np.testing.assert_allclose(anchors[restored + d0_cast], anchors[d0_cast])
    np.testing.assert_allclose(anchors["input_raw"], anchors[d0_cast])


@pytest.mark.follows("test_output_matches_infer")
@pytest.mark.parametrize("input_type", INPUT_TYPES)
def test_output_matches_infer(input_type):
    single = _model_anchors(False, False, 3, False, input_type=input_type)
    sharded = _model_anchors(True, False, 3, False, input_type=input_type)
    pipelined = _model_anchors(True, True, 3, False, input_type=input_type)
    for other in (sharded, pipelined):
        for (_, t1), (_, t2) in zip(_items(single), _items(other), strict=True):
            np.testing.assert_allclose(t1, t2, rtol=1e-5, atol=1e-6)
    _, e0, nll, _ = single["ids"]
    for batch in range(3):
        expected_e0, expected_loss = _reference_forward(
            single["input_raw"][batch], single["label_raw"][batch]
        )
        np.testing.assert_allclose(pipelined[e0][batch], expected_e0, rtol=1e-5)
        np.testing.assert_allclose(pipelined[nll][batch], expected_loss, rtol=1e-4)


def _prepare(init_builder, options, num_ipus, bps, training=False):
    """The original's PopartTestSession: init_builder(builder) -> anchors (the first is the
    loss when training); inputs fed with the data they were created from unless given."""
    builder = popart.Builder()
    feeds = {}

    def add_input(data, name=""):
        tensor = builder.addInputTensor(popart.TensorInfo(data), name)
        feeds[tensor] = data
        return tensor

    anchors = init_builder(builder, add_input)
    flow = popart.DataFlow(bps, {a: popart.AnchorReturnType("All") for a in anchors})
    device = _device(num_ipus)
    kwargs = dict(
        fnModel=builder.getModelProto(), dataFlow=flow, userOptions=options, deviceInfo=device
    )
    if training:
        session = popart.TrainingSession(loss=anchors[0], optimizer=popart.ConstSGD(0.01), **kwargs)
    else:
        session = popart.InferenceSession(**kwargs)
    return session, device, feeds, anchors


def _run(session, feeds, bps, given=None):
    inputs = {k: np.stack([v] * bps) if bps > 1 else v for k, v in feeds.items()}
    inputs.update(given or {})
    arrays = session.initAnchorArrays()
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO(inputs, arrays))
    return arrays


@pytest.mark.follows("test_pipeline_stage_errors")
def test_pipeline_stage_errors():
    dummy = np.zeros(2, dtype=np.float32)

    def model(graphs, stages):
        def init_builder(builder, add_input):
            d0 = add_input(dummy, "data0")
            s0 = builder.aiOnnx.sin([d0], "s0")
            m0 = builder.aiOnnx.mul([s0, d0])
            e0 = builder.aiOnnx.exp([m0])
            e1 = builder.aiOnnx.exp([e0])
            loss = builder.aiGraphcore.identityloss([e1])
            for tensor, graph, stage in zip((s0, m0, e0, e1, loss), graphs, stages, strict=True):
                builder.virtualGraph(tensor, graph)
                if stage is not None:
                    builder.pipelineStage(tensor, stage)
            return [loss]

        return init_builder

    with pytest.raises(popart.popart_exception) as error:
        _prepare(model([0, 0, 0, 1, 1], [0, 0, 1, 1, 1]), _pipelined_options(), 2, 2)
    assert re.match("Ops .* have the same pipeline stage 1,.*", error.value.args[0])
    with pytest.raises(popart.popart_exception) as error:
        _prepare(model([0, 0, 1, 1, 1], [0, 0, None, 1, 1]), _pipelined_options(), 2, 2)
    assert error.value.args[0].startswith("Only some ops have had their pipeline stage set.")


@pytest.mark.follows("test_pipeline_stages_backwards_through_ipus")
@pytest.mark.parametrize("explicit", [False, True])
def test_pipeline_stages_backwards_through_ipus(explicit):
    dummy = np.array([0.5, 1.0], dtype=np.float32)

    def init_builder(builder, add_input):
        d0 = add_input(dummy, "data0")
        s0 = builder.aiOnnx.sin([d0], "s0")
        m0 = builder.aiOnnx.mul([s0, d0])
        e0 = builder.aiOnnx.exp([m0])
        e1 = builder.aiOnnx.exp([e0], "output")
        loss = builder.aiGraphcore.identityloss([e1])
        for tensor in (s0, m0):  # stage 0 on IPU 1
            builder.virtualGraph(tensor, 1)
            builder.pipelineStage(tensor, 0)
        for tensor in (e0, e1, loss):  # stage 1 on IPU 0
            builder.virtualGraph(tensor, 0)
            builder.pipelineStage(tensor, 1)
        return [e1]

    session, device, feeds, anchors = _prepare(init_builder, _pipelined_options(explicit), 2, 2)
    try:
        result = _run(session, feeds, 2)
    finally:
        device.detach()
    expected = np.exp(np.exp(np.sin(dummy) * dummy))
    np.testing.assert_allclose(result[anchors[0]][0], expected, rtol=1e-6)


@pytest.mark.follows("test_multiple_stages_per_virtual_graph_inference")
@pytest.mark.parametrize("explicit", [False, True])
def test_multiple_stages_per_virtual_graph_inference(explicit):
    bps = 4
    data = np.random.rand(bps, 2, 2).astype(np.float32)
    weights = np.random.rand(2, 2).astype(np.float32)

    def init_builder(builder, add_input):
        d0 = add_input(np.zeros([2, 2], np.float32), "data0")
        w0 = builder.addInitializedInputTensor(weights)
        mm0 = builder.aiOnnx.matmul([d0, w0], "mm0")
        s0 = builder.aiOnnx.sin([mm0])
        mm1 = builder.aiOnnx.matmul([s0, w0], "mm1")
        loss = builder.aiGraphcore.identityloss([mm1])
        for tensor, stage, graph in ((mm0, 0, 0), (s0, 1, 1), (mm1, 2, 0), (loss, 2, 0)):
            builder.pipelineStage(tensor, stage)
            builder.virtualGraph(tensor, graph)
        return [mm1]

    session, device, feeds, anchors = _prepare(init_builder, _pipelined_options(explicit), 2, bps)
    try:
        result = _run(session, feeds, bps, {"data0": data})
    finally:
        device.detach()
    expected = np.sin(data @ weights) @ weights
    np.testing.assert_allclose(result[anchors[0]], expected, rtol=1e-5)


@pytest.mark.follows("test_multiple_stages_per_virtual_graph_sharing_same_tensor_inference")
def test_multiple_stages_per_virtual_graph_sharing_same_tensor_inference():
    bps = 4
    data = np.arange(bps * 4).reshape(bps, 2, 2).astype(np.float32)

    def init_builder(builder, add_input):
        x = add_input(np.zeros([2, 2], np.float32), "data0")
        a = builder.aiOnnx.add([x, x])
        b = builder.aiOnnx.mul([a, a])
        c = builder.aiOnnx.mul([b, b])
        rb = builder.reshape_const(builder.aiOnnx, [b], [4])
        rc = builder.reshape_const(builder.aiOnnx, [c], [4])
        d = builder.aiOnnx.mul([rb, rc])
        placed = ((a, 0, 0), (b, 1, 1), (c, 2, 0), (rb, 3, 1), (rc, 3, 1), (d, 3, 1))
        for tensor, stage, graph in placed:
            builder.pipelineStage(tensor, stage)
            builder.virtualGraph(tensor, graph)
        return [d]

    options = _pipelined_options()
    options.autoRecomputation = popart.RecomputationType.Pipeline
    options.stashAllTensorsInferencePipeline = True
    session, device, feeds, anchors = _prepare(init_builder, options, 2, bps)
    try:
        result = _run(session, feeds, bps, {"data0": data})
    finally:
        device.detach()
    a = data + data
    b = a * a
    c = b * b
    np.testing.assert_allclose(result[anchors[0]], b.reshape(bps, -1) * c.reshape(bps, -1))


def _train_and_read(init_builder, weight_data, options, num_ipus, feed):
    weights = {}

    def build(builder, add_input):
        anchors, weight = init_builder(builder, add_input)
        weights[weight] = np.empty_like(weight_data)
        return anchors

    session, device, feeds, anchors = _prepare(build, options, num_ipus, 1, training=True)
    try:
        result = _run(session, feeds, 1, feed)
        session.weightsToHost()
        session.readWeights(popart.PyWeightsIO(weights))
    finally:
        device.detach()
    return next(iter(weights.values())), result[anchors[0]]


@pytest.mark.follows("test_multiple_stages_per_virtual_graph_training")
@pytest.mark.parametrize("input_type", INPUT_TYPES)
def test_multiple_stages_per_virtual_graph_training(input_type):
    accumulation = 5
    data_type = np.float32 if input_type is None else input_type.np_type
    data = np.random.rand(accumulation, 2, 2).astype(data_type)
    weight_data = np.random.rand(2, 2).astype(np.float32)

    def run(pipelined):
        def init_builder(builder, add_input):
            d0 = add_input(np.zeros([2, 2], data_type), "data0")
            w0 = builder.addInitializedInputTensor(weight_data)
            d0_float = d0 if input_type is None else builder.aiOnnx.cast([d0], "FLOAT")
            t0 = builder.aiOnnx.matmul([d0_float, w0])
            t1 = builder.aiOnnx.sin([t0])
            t2 = builder.aiOnnx.matmul([t1, w0])
            loss = builder.aiGraphcore.identityloss([t2])
            if pipelined:
                placed = [(t0, 0, 0), (t1, 1, 1), (t2, 2, 0), (loss, 2, 0)]
                if input_type is not None:
                    placed.append((d0_float, 0, 0))
                for tensor, stage, graph in placed:
                    builder.pipelineStage(tensor, stage)
                    builder.virtualGraph(tensor, graph)
            return [loss], w0

        options = _pipelined_options() if pipelined else popart.SessionOptions()
        options.enableGradientAccumulation = True
        options.accumulationFactor = accumulation
        return _train_and_read(init_builder, weight_data, options, 2 if pipelined else 1,
                               {"data0": data})  # fmt: skip

    w0, r0 = run(False)
    w1, r1 = run(True)
    np.testing.assert_allclose(r0, r1, rtol=1e-5)
    np.testing.assert_allclose(w0, w1, rtol=1e-5)
    # (Beyond the original) the losses of the first weights: numpy's.
    x = data.astype(np.float32)
    expected = np.mean(np.sin(x @ weight_data) @ weight_data, axis=(1, 2))
    np.testing.assert_allclose(r1, expected, rtol=1e-5)


@pytest.mark.follows("test_recomputation")
@pytest.mark.parametrize("input_type", INPUT_TYPES)
def test_recomputation(input_type):
    accumulation = 3
    data_type, scale = (np.float32, 0.1) if input_type is None else (input_type.np_type, 1)
    data = (np.arange(accumulation * 4).astype(data_type) * scale).reshape(accumulation, 2, 2)
    weight_data = (np.arange(4).astype(np.float32) * 0.25).reshape(2, 2)

    def run(recompute):
        def init_builder(builder, add_input):
            d0 = add_input(np.zeros([2, 2], data_type), "data0")
            w0 = builder.addInitializedInputTensor(weight_data)
            d0_float = d0 if input_type is None else builder.aiOnnx.cast([d0], "FLOAT")
            t0 = builder.aiOnnx.mul([d0_float, w0])
            t1 = builder.aiOnnx.sigmoid([t0])
            t2 = builder.aiGraphcore.scale([t1], 2.0)
            loss = builder.aiGraphcore.identityloss([t2])
            for tensor in {d0_float, t0, t1, t2} - {d0}:
                builder.virtualGraph(tensor, 0)
            builder.virtualGraph(loss, 1)
            return [loss], w0

        options = _pipelined_options()
        if recompute:
            options.autoRecomputation = popart.RecomputationType.Standard
        options.enableGradientAccumulation = True
        options.accumulationFactor = accumulation
        return _train_and_read(init_builder, weight_data, options, 2, {"data0": data})[0]

    without, with_recomputation = run(False), run(True)
    np.testing.assert_array_equal(without, with_recomputation)
    # (Beyond the original) numpy's SGD step: the mean loss of 2 * sigmoid(x * w), summed
    # over the micro-batches.
    x = data.astype(np.float32)
    sigmoid = 1 / (1 + np.exp(-x * weight_data))
    gradient = np.sum(2 * sigmoid * (1 - sigmoid) * x / 4, axis=0)
    np.testing.assert_allclose(without, weight_data - 0.01 * gradient, rtol=1e-5, atol=1e-7)


@pytest.mark.follows("test_internal_alias_ipucopy")
@pytest.mark.parametrize("explicit", [False, True])
def test_internal_alias_ipucopy(explicit):
    builder = popart.Builder()
    with builder.virtualGraph(0), builder.pipelineStage(0):
        model_input = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 1]))
        concat = builder.aiOnnx.concat([model_input, model_input], axis=1)
    with builder.virtualGraph(1), builder.pipelineStage(1):
        result = builder.aiOnnx.add([concat, concat])
    data = np.random.rand(2, 1, 2, 1).astype(np.float32)
    anchors = _run_inference(builder, [result], _pipelined_options(explicit), 2, 2,
                             {model_input: data})  # fmt: skip
    # (Beyond the original, which feeds zeros) numpy's answer.
    np.testing.assert_allclose(anchors[result], 2 * np.concatenate([data, data], axis=2))


@pytest.mark.follows("test_bad_auto_staging")
def test_bad_auto_staging():
    def init_builder(builder, add_input):
        d0 = add_input(np.random.rand(2, 2).astype(np.float32), "data0")
        t0 = builder.aiOnnx.sin([d0])
        t1 = builder.aiOnnx.sin([t0])
        t2 = builder.aiOnnx.sin([t1])
        loss = builder.aiGraphcore.identityloss([t2])
        for tensor, graph in ((t0, 0), (t1, 1), (t2, 0), (loss, 0)):
            builder.virtualGraph(tensor, graph)
        return [loss]

    with pytest.raises(popart.popart_exception) as error:
        _prepare(init_builder, _pipelined_options(), 2, 4)
    assert error.value.args[0].startswith(
        "Tensor Sin:0/1 is consumed in an earlier pipeline stage than it is produced"
    )


@pytest.mark.follows("test_pipeline_fwd_only_program_errors")
@pytest.mark.parametrize("mode", ["nopipeline", "explicit", "accumulate"])
def test_pipeline_fwd_only_program_errors(mode):
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    d1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [10]))
    s0 = builder.aiOnnx.sin([d0], "s0")
    r0 = builder.aiOnnx.exp([d1], "r0")
    m0 = builder.aiOnnx.mul([s0, r0], "m0")
    builder.addOutputTensor(m0)
    for stage, tensor in enumerate((s0, r0, m0)):
        builder.pipelineStage(tensor, stage)
        builder.virtualGraph(tensor, stage)
    options = popart.SessionOptions()
    options.enablePipelining = mode != "nopipeline"
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.createImplicitPipeliningFwdOnlyProgram = True
    if mode == "explicit":
        options.enableExplicitIR(True)
    if mode != "accumulate":
        options.enableGradientAccumulation = True
        options.accumulationFactor = 5
    device = _device(3)
    try:
        with pytest.raises(popart.popart_exception) as error:
            session = popart.TrainingSession(
                fnModel=builder.getModelProto(),
                dataFlow=popart.DataFlow(10, [m0]),
                loss=m0,
                optimizer=popart.ConstSGD(1),
                userOptions=options,
                deviceInfo=device,
            )
            session.prepareDevice()
    finally:
        device.detach()
    start = "Implicit pipelining forward-only program is not supported "
    expected = {
        "nopipeline": "without implicit pipelining.",
        "explicit": "with explicit pipelining.",
        "accumulate": "without gradient accumulation.",
    }[mode]
    assert error.value.args[0].startswith(start + expected)
