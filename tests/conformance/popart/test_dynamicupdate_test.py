"""graphcore/popart tests/integration/operators_test/dynamicupdate_test.py: ai.graphcore
DynamicUpdate writing slices at run-time offsets into an Init tensor, on one or several
axes, its gradient, overlapping updates with and without noOverlap, and its shape inferred
inside a called subgraph (Cpu)."""

import numpy as np
import pytest

import popart


def _updates_into_init(op_tester, pieces, shape, axis, size, train=False):
    """DynamicUpdate each of `pieces` at offset i*size along `axis` of an Init tensor."""
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        add = builder.addInitializedInputTensor if train else builder.addInputTensor
        tensors = [add(p) for p in pieces]
        out = builder.aiGraphcore.init(
            shape, popart.DataType.FLOAT, popart.InitType.NoInit, "test_init"
        )
        assert builder.getTensorShape(out) == shape
        for i, tensor in enumerate(tensors):
            index = builder.addInputTensor(np.asarray([i * size], np.uint32))
            out = builder.aiGraphcore.dynamicupdate(
                [out, index, tensor], axes=[axis], sizes=[size], noOverlap=True
            )
            assert builder.getTensorShape(out) == shape
        if not train:
            builder.addOutputTensor(out)
            return [out]
        total = builder.aiOnnx.unsqueeze(
            [builder.aiOnnx.reducesum([out], axes=list(range(len(shape))), keepdims=False)],
            axes=[0],
        )
        builder.addOutputTensor(total)
        return [total, g + total, *[g + t for t in tensors], out]

    def reference(ref_data):
        pieces_ = [
            p.reshape([s if a != axis else size for a, s in enumerate(shape)]) for p in pieces
        ]
        full = np.concatenate(pieces_, axis=axis)
        if not train:
            return [full]
        d__o = ref_data.getOutputTensorGrad(0)
        grads = [np.full(p.shape, d__o[0], np.float32) for p in pieces]
        return [np.array([full.sum()], np.float32), d__o, *grads, full]

    op_tester.setPatterns(popart.PatternsLevel.All, enableRuntimeAsserts=False)
    op_tester.rtol = 1e-5
    op_tester.run(init_builder, reference, "train" if train else "infer")


def _rand(*shape):
    return np.random.rand(*shape).astype(np.float32)


@pytest.mark.follows("test_dynamicupdate")
def test_dynamicupdate(op_tester):
    _updates_into_init(op_tester, [_rand(5, 4, 7) for _ in range(3)], [5, 12, 7], 1, 4)


@pytest.mark.follows("test_dynamicupdate_no_leading_slice_dim")
def test_dynamicupdate_no_leading_slice_dim(op_tester):
    _updates_into_init(op_tester, [_rand(4, 7) for _ in range(3)], [3, 4, 7], 0, 1)


@pytest.mark.follows("test_dynamicupdate_multi_dim")
def test_dynamicupdate_multi_dim(op_tester):
    data, update = _rand(5, 12, 7), _rand(3, 4, 5)
    indices = [1, 3, 2]

    def init_builder(builder):
        t_update = builder.addInputTensor(update)
        out = builder.addInputTensor(data)
        index = builder.addInputTensor(np.asarray(indices, np.uint32))
        out = builder.aiGraphcore.dynamicupdate(
            [out, index, t_update], axes=[0, 1, 2], sizes=update.shape, noOverlap=True
        )
        assert builder.getTensorShape(out) == list(data.shape)
        builder.addOutputTensor(out)
        return [out]

    expected = data.copy()
    expected[1:4, 3:7, 2:7] = update
    op_tester.setPatterns(popart.PatternsLevel.All, enableRuntimeAsserts=False)
    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_dynamicupdate_training")
def test_dynamicupdate_training(op_tester):
    _updates_into_init(op_tester, [_rand(5, 4, 7) for _ in range(3)], [5, 12, 7], 1, 4, train=True)


def _overlapping(op_tester, no_overlap, extra_grad):
    """Scaled updates by 1 and 2 at offsets 0 and 4 (overlapping at 4) of a zero tensor."""
    data0, data1 = _rand(5), _rand(5)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        tensors = [builder.addInitializedInputTensor(d) for d in (data0, data1)]
        out = builder.aiGraphcore.init(
            [10], popart.DataType.FLOAT, popart.InitType.Zero, "test_init"
        )
        for i, tensor in enumerate(tensors):
            index = builder.addInputTensor(np.asarray([i * 4], np.uint32))
            scaled = builder.aiGraphcore.scale([tensor], float(1 + i))
            out = builder.aiGraphcore.dynamicupdate(
                [out, index, scaled], axes=[0], sizes=[5], noOverlap=no_overlap
            )
        total = builder.aiOnnx.unsqueeze(
            [builder.aiOnnx.reducesum([out], axes=[0], keepdims=False)], axes=[0]
        )
        builder.addOutputTensor(total)
        return [total, g + total, *[g + t for t in tensors], out]

    def reference(ref_data):
        out = np.zeros(10, np.float32)
        out[0:5] = data0
        out[4:9] = 2 * data1
        d__o = ref_data.getOutputTensorGrad(0)[0]
        # The second update overwrites element 4: the first gets no gradient there.
        grad0 = np.full(5, d__o, np.float32)
        grad0[4] = extra_grad
        return [
            np.array([out.sum()], np.float32),
            np.array([d__o]),
            grad0,
            np.full(5, 2 * d__o, np.float32),
            out,
        ]

    op_tester.setPatterns(popart.PatternsLevel.All, enableRuntimeAsserts=False)
    op_tester.rtol = 1e-5
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_dynamicupdate_overlap_wrong")
def test_dynamicupdate_overlap_wrong(op_tester):
    _overlapping(op_tester, True, 1.0)


@pytest.mark.follows("test_dynamicupdate_overlap_correct")
def test_dynamicupdate_overlap_correct(op_tester):
    _overlapping(op_tester, False, 0.0)


@pytest.mark.follows("test_dynamicupdate_shape")
def test_dynamicupdate_shape():
    """DynamicUpdate's shape is inferred inside a called subgraph (from the original's
    deepvoice model)."""
    samples, channels, hidden, look_ahead, text = 2, 256, 256, 3, 80
    shapes = [
        ("FLOAT", [samples, channels, 1]),  # h_q
        ("FLOAT", [samples, channels, 1]),  # query positional encoding
        ("FLOAT", [hidden, channels]),  # query projection weights
        ("FLOAT", [samples, hidden, text]),  # Q_k
        ("FLOAT", [samples, hidden, text]),  # Q_v
        ("FLOAT", [1]),  # number of time steps
        ("FLOAT", [channels, hidden]),  # context vector projection weights
        ("FLOAT", [1, 1, text]),  # large negative tensor
        ("FLOAT", [1, 1, look_ahead]),  # zeros mask
    ] + [("INT32", [1])] * samples  # last attended

    builder = popart.Builder()
    sub = builder.createSubgraphBuilder()
    ins = [sub.addInputTensor(popart.TensorInfo(t, s)) for t, s in shapes]
    h_q, pos, proj, q_k, q_v, steps, ctx_w, negative, zeros = ins[:9]
    last_attended = ins[9:]
    q_q = sub.aiOnnx.matmul([proj, sub.aiOnnx.add([h_q, pos])])
    scores = sub.aiOnnx.matmul([sub.aiOnnx.transpose([q_q], perm=[0, 2, 1]), q_k])
    split = sub.aiOnnx.split([scores], num_outputs=samples, axis=0)
    for i in range(samples):
        mask = sub.aiGraphcore.dynamicupdate(
            [negative, last_attended[i], zeros], axes=[2], sizes=[look_ahead], noOverlap=True
        )
        split[i] = sub.aiOnnx.add([split[i], mask])
    scores = sub.aiOnnx.softmax([sub.aiOnnx.concat(split, axis=0)], axis=2)
    attended = sub.aiOnnx.argmax([scores], axis=2)
    scores = sub.aiOnnx.transpose([scores], perm=[0, 2, 1])
    context = sub.aiOnnx.div([sub.aiOnnx.matmul([q_v, scores]), sub.aiOnnx.sqrt([steps])])
    context = sub.aiOnnx.relu([sub.aiOnnx.matmul([ctx_w, context])])
    for out in (context, scores, attended):
        sub.addOutputTensor(out)

    main_inputs = [builder.addInputTensor(popart.TensorInfo(t, s)) for t, s in shapes]
    context, scores, attended = builder.aiGraphcore.call(main_inputs, 3, callee=sub)
    assert builder.getTensorShape(context) == [samples, channels, 1]
    assert builder.getTensorShape(scores) == [samples, text, 1]
    assert builder.getTensorShape(attended) == [samples, 1, 1]
