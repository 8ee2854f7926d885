"""graphcore/popart tests/integration/operators_test/call_test_ipu_model.py: Calls on two
pipeline stages: a called subgraph's ops need the calling op's virtual graph id (IpuModel2)."""

import re

import numpy as np
import pytest

import popart
from conftest import create_test_device


def _pipelined_calls(subgraph_of):
    builder = popart.Builder()
    i0 = builder.addInputTensor(popart.TensorInfo("INT32", [2]))
    i1 = builder.addInputTensor(popart.TensorInfo("INT32", [2]))
    with builder.virtualGraph(0), builder.pipelineStage(0):
        act = builder.aiGraphcore.call([i0, i1], 1, subgraph_of(builder, 0))[0]
    with builder.virtualGraph(1), builder.pipelineStage(1):
        out = builder.aiGraphcore.call([act, i1], 1, subgraph_of(builder, 1))[0]
    builder.addOutputTensor(out)
    options = popart.SessionOptions()
    options.enablePipelining = True
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    device = create_test_device("IpuModel2", num_ipus=4, tiles_per_ipu=20)
    return builder, out, options, device


def _adder(builder, virtual_graph):
    """A subgraph adding its two inputs, on `virtual_graph` (None: no virtual graph id)."""
    subgraph = builder.createSubgraphBuilder()
    info = popart.TensorInfo("INT32", [2])
    a, b = subgraph.addInputTensor(info), subgraph.addInputTensor(info)
    if virtual_graph is None:
        subgraph.addOutputTensor(subgraph.aiOnnx.add([a, b]))
    else:
        with subgraph.virtualGraph(virtual_graph):
            subgraph.addOutputTensor(subgraph.aiOnnx.add([a, b]))
    return subgraph


@pytest.mark.follows("test_call_pipelined_error")
@pytest.mark.parametrize(
    "subgraph_of,pattern",
    [
        (
            lambda builder, stage: _adder(builder, None),
            'Op Op(.*) in subgraph ".*" does not have a virtual graph id. When pipelining, '
            "subgraph ops must have a virtual graph id set.",
        ),
        (
            lambda builder, stage: _adder(builder, 0),  # the second call is on IPU 1
            "The virtual graph id .* for Op Op.* in subgraph .* does not match the virtual "
            "graph id .* of the calling op. When pipelining, subgraph ops must have a virtual "
            "graph id matching the calling op.",
        ),
    ],
    ids=["no_vgraph_id", "wrong_vgraph_id"],
)
def test_call_pipelined_error(subgraph_of, pattern):
    builder, out, options, device = _pipelined_calls(subgraph_of)
    with device, pytest.raises(popart.popart_exception) as e_info:
        popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(10, [out]),
            userOptions=options,
            deviceInfo=device,
        )
    assert re.match(pattern, e_info.value.args[0])


@pytest.mark.follows("test_call_pipelined")
def test_call_pipelined():
    builder, out, options, device = _pipelined_calls(_adder)
    with device:
        session = popart.InferenceSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(10, [out]),
            userOptions=options,
            deviceInfo=device,
        )
        session.prepareDevice()


def _shared_weight_reference(x, w, labels, layers, learning_rate, steps):
    """The original's torch reference, in TensorFlow: `layers` times matmul by ONE shared
    weight, relu, log-softmax; NLL loss (mean); plain SGD. The loss and weight after each of
    `steps` updates."""
    import tensorflow as tf

    weight = tf.Variable(w)
    results = []
    for _ in range(steps):
        with tf.GradientTape() as tape:
            r = tf.constant(x)
            for _ in range(layers):
                r = tf.nn.log_softmax(tf.nn.relu(r @ weight), axis=1)
            loss = -tf.reduce_mean(tf.gather(r, labels, axis=1, batch_dims=1))
        weight.assign_sub(learning_rate * tape.gradient(loss, weight))
        results.append((loss.numpy(), weight.numpy()))
    return results


@pytest.mark.follows("test_subgraph_attrs")
def test_subgraph_attrs():
    rng = np.random.RandomState(0)
    layers, batches_per_step, learning_rate, shape = 3, 10, 0.1, [4, 4]
    x = rng.rand(*shape).astype(np.float32)
    w_init = rng.rand(*shape).astype(np.float32)
    labels = rng.randint(0, 4, size=[4]).astype(np.int32)
    builder = popart.Builder()
    in0 = builder.addInputTensor(popart.TensorInfo(x))
    lbl0 = builder.addInputTensor(popart.TensorInfo(labels))

    def subgraph(virtual_graph):
        sub = builder.createSubgraphBuilder()
        info = popart.TensorInfo("FLOAT", shape)
        a, b = sub.addInputTensor(info), sub.addInputTensor(info)
        with sub.virtualGraph(virtual_graph):
            out = sub.aiOnnx.logsoftmax([sub.aiOnnx.relu([sub.aiOnnx.matmul([a, b])])], axis=1)
        sub.addOutputTensor(out)
        return sub

    act = in0
    for layer in range(layers):
        with builder.virtualGraph(layer):
            w0 = builder.addInitializedInputTensor(w_init)
            act = builder.aiGraphcore.call([act, w0], 1, subgraph(layer), f"subgraph_{layer}")[0]
            assert builder.getVirtualGraph(act) == layer
    builder.addOutputTensor(act)
    options = popart.SessionOptions()
    options.virtualGraphMode = popart.VirtualGraphMode.Manual
    options.enablePipelining = True
    loss = builder.aiGraphcore.nllloss([act, lbl0])
    builder.virtualGraph(loss, 2)
    builder.addOutputTensor(loss)
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(
            batches_per_step,
            {act: popart.AnchorReturnType("All"), w0: popart.AnchorReturnType("All")},
        ),
        loss=loss,
        optimizer=popart.ConstSGD(learning_rate),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": layers}),
        userOptions=options,
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    stepio = popart.PyStepIO(
        {
            in0: np.repeat(x[np.newaxis], batches_per_step, axis=0),
            lbl0: np.repeat(labels[np.newaxis], batches_per_step, axis=0),
        },
        anchors,
    )
    reference = _shared_weight_reference(x, w_init, labels, layers, learning_rate, 40)
    for step in range(4):
        session.weightsFromHost()
        session.run(stepio)
        # The original's checks after each run of `batches_per_step` torch updates.
        ref_loss, ref_weight = reference[(step + 1) * batches_per_step - 1]
        assert np.allclose(ref_loss, -np.mean(anchors[act]))
        assert np.allclose(ref_weight, anchors[w0])
