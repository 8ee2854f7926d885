"""graphcore/popart tests/integration/operators_test/detach_test.py: ai.graphcore Detach
stops the gradient of its branch (a Pow, then two convolutions trained for four SGD steps
with weight decay, against stock TensorFlow with or without the branch stopped), and
anchoring a gradient a detach has removed is refused (Cpu, IpuModel)."""

import numpy as np
import pytest
import tensorflow as tf

import popart

LEARNING_RATE = 1e-1
WEIGHT_DECAY = 1e-2
G = popart.reservedGradientPrefix()


@pytest.mark.follows("test_detach_grad")
@pytest.mark.parametrize("inplacing", [True, False])
def test_detach_grad(op_tester, inplacing):
    data = np.random.rand(4, 4).astype(np.float32)
    w_data = np.random.rand(4, 4).astype(np.float32)

    def init_builder(builder):
        i = builder.addInputTensor(data)
        two = builder.aiOnnx.constant(np.array([2]).astype(np.float32), "two")
        w = builder.addInitializedInputTensor(w_data)
        a1 = builder.aiOnnx.pow([i, two])
        detach = builder.aiGraphcore.detach([builder.aiOnnx.pow([i, two])])
        o = builder.aiOnnx.softmax([builder.aiOnnx.sum([a1, detach, w])], axis=1)
        builder.addOutputTensor(o)
        return [o, G + i, G + w, G + o]

    def reference(ref_data):
        x, w = tf.Variable(data), tf.Variable(w_data)
        with tf.GradientTape() as tape:
            out = tf.nn.softmax(x**2 + tf.stop_gradient(x**2) + w, axis=1)
        d__o = ref_data.getOutputTensorGrad(0)
        dx, dw = tape.gradient(out, [x, w], output_gradients=tf.constant(d__o))
        return [out.numpy(), dx.numpy(), dw.numpy(), None]

    op_tester.setPatterns(["PowArg0GradOp"], enableRuntimeAsserts=False)
    op_tester.inplacing = inplacing
    op_tester.atol = 1e-7
    op_tester.run(init_builder, reference, "train")


BATCH, CLASSES = 8, 32
DSHAPE, WSHAPE = [BATCH, 2, 4, 4], [2, 2, 3, 3]


def _conv(builder, x, w):
    conv = builder.aiOnnx.conv(
        [x, w], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1], debugContext="conv"
    )
    return builder.reshape_const(builder.aiOnnx, [conv], [BATCH, CLASSES])


def _tf_conv(x, w):
    """NCHW input, OIHW filters, as ONNX; TensorFlow's CPU kernels are channels-last."""
    y = tf.nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), tf.transpose(w, [2, 3, 1, 0]), 1, "SAME")
    return tf.reshape(tf.transpose(y, [0, 3, 1, 2]), [BATCH, CLASSES])


@pytest.mark.follows("test_detach_grad_branches")
@pytest.mark.parametrize("detach_popart", [True, False])
@pytest.mark.parametrize("detach_reference", [True, False])
def test_detach_grad_branches(detach_popart, detach_reference):
    np.random.seed(0)
    ip_data = np.random.rand(*DSHAPE).astype(np.float32)
    w1_data = np.random.rand(*WSHAPE).astype(np.float32)
    w2_data = np.random.rand(*WSHAPE).astype(np.float32)
    lb_data = np.random.randint(CLASSES, size=[BATCH])

    builder = popart.Builder()
    input_ = builder.addInputTensor(popart.TensorInfo("FLOAT", DSHAPE), "input_i1")
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [BATCH]))
    w1 = builder.addInitializedInputTensor(w1_data)
    w2 = builder.addInitializedInputTensor(w2_data)
    r2 = _conv(builder, input_, w2)
    if detach_popart:
        r2 = builder.aiGraphcore.detach([r2])
    o = builder.aiOnnx.softmax([builder.aiOnnx.sum([_conv(builder, input_, w1), r2])], axis=1)
    loss = builder.aiGraphcore.nllloss([o, lb])
    data_flow = popart.DataFlow(1, [o, loss, G + o, G + input_, w1, w2])
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=data_flow,
        loss=loss,
        optimizer=popart.ConstSGD(LEARNING_RATE, WEIGHT_DECAY),
        userOptions=popart.SessionOptions(),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({}),
    )
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    stepio = popart.PyStepIO({input_: ip_data, lb: lb_data.astype(np.int32)}, anchors)
    session.weightsFromHost()

    # The reference: SGD with weight decay (w -= lr * (grad + wd * w)), as torch's optimizer.
    v1, v2 = tf.Variable(w1_data), tf.Variable(w2_data)
    x = tf.constant(ip_data)
    for _ in range(4):
        session.run(stepio)
        with tf.GradientTape() as tape:
            x2 = _tf_conv(x, v2)
            if detach_reference:
                x2 = tf.stop_gradient(x2)
            logits = tf.nn.log_softmax(_tf_conv(x, v1) + x2, axis=1)
            ref_loss = -tf.reduce_mean(tf.gather(logits, lb_data, axis=1, batch_dims=1))
        grads = tape.gradient(ref_loss, [v1, v2])
        for v, grad in zip([v1, v2], grads, strict=True):
            if grad is None:  # a weight the loss does not reach is not updated
                continue
            v.assign_sub(LEARNING_RATE * (grad + WEIGHT_DECAY * v))
        if detach_popart == detach_reference:
            assert np.allclose(anchors[w1], v1.numpy(), 1e-4)
            assert np.allclose(anchors[w2], v2.numpy(), 1e-4)
        else:
            assert not np.allclose(anchors[w2], v2.numpy(), 1e-4)


@pytest.mark.follows("test_detach_error")
def test_detach_error():
    np.random.seed(0)
    builder = popart.Builder()
    input_ = builder.addInputTensor(popart.TensorInfo("FLOAT", DSHAPE), "input_i1")
    lb = builder.addInputTensor(popart.TensorInfo("INT32", [BATCH]))
    w1 = builder.addInitializedInputTensor(np.random.rand(*WSHAPE).astype(np.float32))
    o = builder.aiGraphcore.detach([_conv(builder, input_, w1)])
    o = builder.aiOnnx.softmax([o], axis=1)
    loss = builder.aiGraphcore.nllloss([o, lb])
    data_flow = popart.DataFlow(1, [o, loss, G + input_])
    with pytest.raises(popart.popart_exception) as e_info:
        popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=data_flow,
            loss=loss,
            optimizer=popart.ConstSGD(LEARNING_RATE, WEIGHT_DECAY),
            userOptions=popart.SessionOptions(),
            deviceInfo=popart.DeviceManager().createIpuModelDevice({}),
        )
    assert e_info.value.args[0].startswith(f"Anchor tensor `{G + input_}' not in Ir Tensors.")
