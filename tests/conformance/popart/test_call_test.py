"""graphcore/popart tests/integration/operators_test/call_test.py: ai.graphcore Call of a
subgraph (inputs untyped, typed or taken from the parent graph), called twice, nested, under
both subgraph copying strategies, its gradients (also in a name scope, with a constant),
stacked calls matching the same layers inline over several steps, and the errors for output
and input counts that do not match the callee (Cpu)."""

import numpy as np
import pytest

import popart

STRATEGIES = pytest.mark.parametrize(
    "strategy",
    [popart.SubgraphCopyingStrategy.OnEnterAndExit, popart.SubgraphCopyingStrategy.JustInTime],
)
METHODS = ("untyped", "with_info", "from_higher_scope")


def _twice_called(builder, d0, d1, d2, method, op, type_name):
    """out = sg(sg(i0, i1), i2) where sg(a, b) = op(a, b), built as `method` says."""
    i0, i1, i2 = (builder.addInputTensor(d) for d in (d0, d1, d2))
    sub = builder.createSubgraphBuilder()
    if method == "from_higher_scope":
        sub.addInputTensorFromParentGraph(i0)
        sub.addInputTensorFromParentGraph(i1)
        sub.addOutputTensor(getattr(sub.aiOnnx, op)([i0, i1]))
    else:
        if method == "untyped":
            sg0, sg1 = sub.addUntypedInputTensor(), sub.addUntypedInputTensor()
        else:
            info = popart.TensorInfo(type_name, list(d0.shape))
            sg0, sg1 = sub.addInputTensor(info), sub.addInputTensor(info)
        sub.addOutputTensor(getattr(sub.aiOnnx, op)([sg0, sg1]))
    act = builder.aiGraphcore.call([i0, i1], 1, sub)[0]
    out = builder.aiGraphcore.call([act, i2], 1, sub)[0]
    builder.addOutputTensor(out)
    return (i0, i1, i2), out


@pytest.mark.follows("test_call")
@STRATEGIES
def test_call(op_tester, strategy):
    op_tester.options.subgraphCopyingStrategy = strategy
    d0, d1, d2 = (np.asarray(v, np.int32) for v in ([2, -1], [-4, 3], [1, 2]))
    for method in METHODS:

        def init_builder(builder, method=method):
            return [_twice_called(builder, d0, d1, d2, method, "add", "INT32")[1]]

        op_tester.run(init_builder, lambda _: [d0 + d1 + d2], "infer")


@pytest.mark.follows("test_call_grad_1")
@STRATEGIES
def test_call_grad_1(op_tester, grad_of, strategy):
    op_tester.options.subgraphCopyingStrategy = strategy
    d0, d1, d2 = (np.random.normal(size=[4, 4]).astype(np.float32) for _ in range(3))
    g = popart.reservedGradientPrefix()
    for method in METHODS:

        def init_builder(builder, method=method):
            inputs, out = _twice_called(builder, d0, d1, d2, method, "matmul", "FLOAT")
            return [out, g + out, *[g + i for i in inputs]]

        def reference(ref_data):
            d__o = ref_data.getOutputTensorGrad(0)
            grads = grad_of(lambda a, b, c: a @ b @ c, d0, d1, d2, upstream=d__o)
            return [d0 @ d1 @ d2, d__o, *grads]

        op_tester.setPatterns(popart.PatternsLevel.Default, enableRuntimeAsserts=False)
        op_tester.rtol, op_tester.atol = 1e-4, 1e-5
        op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_nested_calls")
@STRATEGIES
def test_nested_calls(op_tester, strategy):
    op_tester.options.subgraphCopyingStrategy = strategy
    d0, d1, d2 = (np.asarray(v, np.int32) for v in ([2, -1], [-4, 3], [1, 2]))

    def init_builder(builder):
        sg0 = builder.createSubgraphBuilder()
        sg0.addOutputTensor(sg0.aiGraphcore.scale([sg0.addUntypedInputTensor()], 2))
        sg1 = builder.createSubgraphBuilder()
        sg1_i0, sg1_i1 = sg1.addUntypedInputTensor(), sg1.addUntypedInputTensor()
        sg1_act0 = sg1.aiGraphcore.call([sg1_i0], 1, sg0)[0]
        sg1.addOutputTensor(sg1.aiOnnx.add([sg1_act0, sg1_i1]))
        i0, i1, i2 = (builder.addInputTensor(d) for d in (d0, d1, d2))
        act0 = builder.aiGraphcore.call([i0, i1], 1, sg1)[0]
        act1 = builder.aiGraphcore.call([i2], 1, sg0)[0]
        out = builder.aiGraphcore.call([act0, act1], 1, sg1)[0]
        builder.addOutputTensor(out)
        return [out]

    # sg0(x) = 2x, sg1(x, y) = y + sg0(x): sg1(sg1(d0, d1), sg0(d2)).
    op_tester.run(init_builder, lambda _: [2 * d2 + 2 * (d1 + 2 * d0)], "infer")


def _mismatch(op_tester, strategy, num_inputs, num_outputs, outputs_in_callee, name, message):
    op_tester.options.subgraphCopyingStrategy = strategy
    d0 = np.asarray([2, -1], np.int32)

    def init_builder(builder):
        sg0 = builder.createSubgraphBuilder()
        scaled = sg0.aiGraphcore.scale([sg0.addUntypedInputTensor()], 2)
        if outputs_in_callee:
            sg0.addOutputTensor(scaled)
        inputs = [builder.addInputTensor(d0) for _ in range(num_inputs)]
        args = (inputs, num_outputs, sg0, name) if name else (inputs, num_outputs, sg0)
        return builder.aiGraphcore.call(*args)

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, None, "infer")
    assert e_info.value.args[0] == message


@pytest.mark.follows("test_subgraph_with_zero_outputs")
@STRATEGIES
def test_subgraph_with_zero_outputs(op_tester, strategy):
    message = "For CallOp '', number of outputs (1) does not match that of the callee subgraph (0)"
    _mismatch(op_tester, strategy, 1, 1, False, None, message)


@pytest.mark.follows("test_subgraph_call_mismatch0")
@STRATEGIES
def test_subgraph_call_mismatch0(op_tester, strategy):
    message = (
        "For CallOp 'debug', number of outputs (2) does not match that of the callee subgraph (1)"
    )
    _mismatch(op_tester, strategy, 1, 2, True, "debug", message)


@pytest.mark.follows("test_subgraph_call_mismatch1")
@STRATEGIES
def test_subgraph_call_mismatch1(op_tester, strategy):
    message = (
        "For CallOp 'debug', number of inputs (3) does not match that of the callee subgraph (1)"
    )
    _mismatch(op_tester, strategy, 3, 1, True, "debug", message)


def _call_matmul(op_tester, grad_of, scoped):
    d0, d1 = (np.random.normal(size=[4, 4]).astype(np.float32) for _ in range(2))
    c0 = np.ones([4, 4], np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i0 = builder.addInputTensor(d0, "input_d0")
        i1 = builder.addInputTensor(d1, "input_d1")
        sub = builder.createSubgraphBuilder()
        sub.addInputTensorFromParentGraph(i0)
        sub.addInputTensorFromParentGraph(i1)
        if scoped:
            with sub.nameScope("example_scope"):
                m = sub.aiOnnx.matmul([i0, i1], "mul_inside_subgraph")
                c = sub.aiOnnx.constant(c0, "subgraph_const")
                sub.addOutputTensor(sub.aiOnnx.add([m, c], "add_inside_subgraph"))
        else:
            sub.addOutputTensor(sub.aiOnnx.matmul([i0, i1], "add_inside_subgraph"))
        out = builder.aiGraphcore.call([i0, i1], 1, sub, "call_subgraph")[0]
        builder.addOutputTensor(out)
        return [out, g + out, g + i0, g + i1]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        return [
            d0 @ d1 + (c0 if scoped else 0),
            d__o,
            *grad_of(lambda a, b: a @ b, d0, d1, upstream=d__o),
        ]

    op_tester.setPatterns(popart.PatternsLevel.Default, enableRuntimeAsserts=False)
    op_tester.rtol, op_tester.atol = 1e-5, 1e-6
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_call_grad_2")
@STRATEGIES
def test_call_grad_2(op_tester, grad_of, strategy):
    op_tester.options.subgraphCopyingStrategy = strategy
    _call_matmul(op_tester, grad_of, scoped=False)


@pytest.mark.follows("test_call_grad_scoped")
def test_call_grad_scoped(op_tester, grad_of):
    _call_matmul(op_tester, grad_of, scoped=True)


@pytest.mark.follows("test_call_grad_3")
@STRATEGIES
def test_call_grad_3(strategy):
    """A Softmax in a called subgraph trains as the same Softmax inline (float16)."""
    data = np.random.rand(1, 2).astype(np.float16)
    labels = np.random.rand(1).astype(np.int32)

    def run(subgraph):
        builder = popart.Builder()
        ip = builder.addInputTensor(popart.TensorInfo("FLOAT16", [1, 2]))
        lb = builder.addInputTensor(popart.TensorInfo("INT32", [1]))
        w = builder.addInitializedInputTensor(np.ones([2, 2], np.float16))
        b = builder.addInitializedInputTensor(np.ones([2], np.float16))
        gemm = builder.aiOnnx.gemm([ip, w, b], 1.0, 1.0, False, False)
        relu = builder.aiOnnx.relu([gemm])
        if subgraph:
            sub = builder.createSubgraphBuilder()
            sub.addInputTensorFromParentGraph(relu)
            sub.addOutputTensor(sub.aiOnnx.softmax([relu]))
            probs = builder.aiGraphcore.call([relu], 1, sub, "call_subgraph")[0]
        else:
            probs = builder.aiOnnx.softmax([relu])
        nll = builder.aiGraphcore.nllloss([probs, lb])
        g = popart.reservedGradientPrefix()
        art = popart.AnchorReturnType("All")
        anchors_ids = [ip, g + ip, relu, g + relu, gemm, g + gemm]
        options = popart.SessionOptions()
        options.subgraphCopyingStrategy = strategy
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {a: art for a in anchors_ids}),
            loss=nll,
            optimizer=popart.ConstSGD(0.001),
            userOptions=options,
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            patterns=popart.Patterns(popart.PatternsLevel.Default),
        )
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        session.weightsFromHost()
        session.run(popart.PyStepIO({ip: data, lb: labels}, anchors))
        return [anchors[a] for a in anchors_ids]

    called, inline = run(True), run(False)
    assert np.any(called[3] != 0)  # the gradient reached the relu
    for a, b in zip(called, inline, strict=True):
        np.testing.assert_allclose(a, b)


def _stacked(builder, shape, in0, w0, layers, subgraph):
    if not subgraph:
        act = in0
        for layer in range(layers):
            act = builder.aiOnnx.matmul([act, w0], f"mm_layer{layer}")
            act = builder.aiOnnx.relu([act], f"relu_layer{layer}")
        return act
    sub = builder.createSubgraphBuilder()
    info = popart.TensorInfo("FLOAT", shape)
    sg0, sg1 = sub.addInputTensor(info), sub.addInputTensor(info)
    sub.addOutputTensor(sub.aiOnnx.relu([sub.aiOnnx.matmul([sg0, sg1], "mm_layer")], "relu_layer"))
    act = in0
    for layer in range(layers):
        act = builder.aiGraphcore.call([act, w0], 1, sub, f"subgraph_{layer}")[0]
    return act


@pytest.mark.follows("test_stacked_subgraphs")
@STRATEGIES
def test_stacked_subgraphs(op_tester, grad_of, strategy):
    import tensorflow as tf

    op_tester.options.subgraphCopyingStrategy = strategy
    rng = np.random.RandomState(0)
    input_, w0_init = rng.rand(4, 4).astype(np.float32), rng.rand(4, 4).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        in0 = builder.addInputTensor(input_)
        w0 = builder.addInitializedInputTensor(w0_init)
        out = _stacked(builder, [4, 4], in0, w0, 4, subgraph=True)
        builder.addOutputTensor(out)
        return [out, g + out, g + in0, g + w0]

    def layers(x, w):
        for _ in range(4):
            x = (
                tf.nn.relu(x @ w)
                if isinstance(x, tf.Variable | tf.Tensor)
                else np.maximum(x @ w, 0)
            )
        return x

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        # The weight's value after the step: the original compares the gradient anchor only.
        grads = grad_of(layers, input_, w0_init, upstream=d__o)
        return [layers(input_, w0_init), d__o, *grads]

    op_tester.setPatterns(popart.PatternsLevel.Default, enableRuntimeAsserts=False)
    op_tester.rtol, op_tester.atol = 1e-4, 1e-5
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_stacked_subgraphs_2")
@STRATEGIES
def test_stacked_subgraphs_2(strategy):
    rng = np.random.RandomState(0)
    input_, w0_init = rng.rand(4, 4).astype(np.float32), rng.rand(4, 4).astype(np.float32)

    def run(subgraph, steps=5):
        builder = popart.Builder()
        in0 = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 4]))
        w0 = builder.addInitializedInputTensor(w0_init)
        loss = builder.aiGraphcore.identityloss([_stacked(builder, [4, 4], in0, w0, 4, subgraph)])
        builder.addOutputTensor(loss)
        g = popart.reservedGradientPrefix()
        ids = [w0, g + w0, in0, g + in0]
        options = popart.SessionOptions()
        options.subgraphCopyingStrategy = strategy
        session = popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {a: popart.AnchorReturnType("All") for a in ids}),
            deviceInfo=popart.DeviceManager().createCpuDevice(),
            optimizer=popart.ConstSGD(0.1),
            loss=loss,
            userOptions=options,
        )
        anchors = session.initAnchorArrays()
        stepio = popart.PyStepIO({in0: input_}, anchors)
        session.prepareDevice()
        session.weightsFromHost()
        for _ in range(steps):
            session.run(stepio)
        return [anchors[a] for a in ids]

    called, inline = run(True), run(False)
    assert not np.allclose(called[0], w0_init)  # trained
    for a, b in zip(called, inline, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
