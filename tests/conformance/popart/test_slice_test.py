"""graphcore/popart tests/integration/operators_test/slice_test.py: Slice as opset 1
(attributes), opset 10 (initialized or constant inputs) and ai.graphcore Slice, with default
or negative axes, negative and out-of-range bounds (numpy's clamping, empty results),
negative and positive steps, their gradients, and the error for starts not known at compile
time (Cpu)."""

import numpy as np
import pytest

import popart

D2x4 = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]], np.float32)
GRAPHCORE = pytest.mark.parametrize("graphcore", (True, False))


def _index(rank, starts, ends, axes, steps):
    """The numpy index of an ONNX slice (numpy clamps bounds as ONNX does)."""
    index = [slice(None)] * rank
    steps = steps if steps is not None else [1] * len(starts)
    axes = axes if axes is not None else range(len(starts))
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        index[axis] = slice(int(start), int(end), int(step))
    return tuple(index)


def _slice(op_tester, data, starts, ends, axes=None, steps=None, how="constant", shape=None,
           train=False):  # fmt: skip
    """Slice `data` in the way `how` names; compare with numpy (and its gradient)."""
    g = popart.reservedGradientPrefix()
    int_type = np.int32 if how == "initialized" else np.int64

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        if how == "graphcore":
            kwargs = {} if axes is None else {"axes": list(axes)}
            o = builder.aiGraphcore.slice([i1], starts=list(starts), ends=list(ends), **kwargs)
        elif how == "opset9":
            o = builder.aiOnnxOpset9.slice([i1], axes=axes, starts=starts, ends=ends)
        else:
            add = (
                builder.addInitializedInputTensor
                if how == "initialized"
                else builder.aiOnnx.constant
            )
            inputs = [i1, add(np.array(starts, int_type)), add(np.array(ends, int_type))]
            if axes is not None:
                inputs.append(add(np.array(axes, int_type)))
            if steps is not None:
                inputs.append(add(np.array(steps, int_type)))
            o = builder.aiOnnx.slice(inputs)
        if shape is not None:
            assert builder.getTensorShape(o) == shape
        builder.addOutputTensor(o)
        return [o, g + i1, g + o] if train else [o]

    index = _index(data.ndim, starts, ends, axes, steps)

    def reference(ref_data):
        if not train:
            return [data[index]]
        grad = np.zeros_like(data)
        grad[index] = ref_data.getOutputTensorGrad(0)
        return [data[index], grad, None]

    op_tester.run(init_builder, reference, "train" if train else "infer")


@pytest.mark.follows("test_slice_opset1")
@GRAPHCORE
def test_slice_opset1(op_tester, graphcore):
    how = "graphcore" if graphcore else "opset9"
    _slice(op_tester, D2x4, [1, 0], [2, 3], [0, 1], how=how, shape=[1, 3])


@pytest.mark.follows("test_slice_opset10")
def test_slice_opset10(op_tester):
    _slice(op_tester, D2x4, [1, 0], [2, 3], [0, 1], how="initialized")


@pytest.mark.follows("test_slice_default_axes")
def test_slice_default_axes(op_tester):
    _slice(op_tester, D2x4, [1, 0], [2, 3], how="initialized", shape=[1, 3])


@pytest.mark.follows("test_slice_neg")
@GRAPHCORE
def test_slice_neg(op_tester, graphcore):
    data = np.arange(1, 9).astype(np.float32)
    how = "graphcore" if graphcore else "initialized"
    _slice(op_tester, data, [-5], [-3], [0], how=how, shape=[2])


@pytest.mark.follows("test_slice_grad")
@GRAPHCORE
def test_slice_grad(op_tester, graphcore):
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    how = "graphcore" if graphcore else "constant"
    _slice(op_tester, D2x4, [1, 0], [2, 3], [0, 1], how=how, train=True)


@pytest.mark.follows("test_slice_error_start_input")
def test_slice_error_start_input(op_tester):
    def init_builder(builder):
        i1 = builder.addInputTensor(D2x4)
        starts = builder.addInputTensor(np.array([1, 0], np.int32))
        ends = builder.addInputTensor(np.array([2, 3], np.int32))
        o = builder.aiOnnx.slice([i1, starts, ends])
        builder.addOutputTensor(o)
        return [o]

    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, lambda _: [], "train")
    assert e_info.value.args[0] == (
        "Need the value of the ai.onnx.Slice:10 input 'starts' to determine the output shape, "
        "but was unable because [Tensor::getDataViaGraphTraversal] Could not work out tensor "
        "data for input/1."
    )


@pytest.mark.follows("test_slice_start_out_of_bounds")
@GRAPHCORE
def test_slice_start_out_of_bounds(op_tester, graphcore):
    # 1000:1000 on a dim of 10 becomes 10:10, an empty slice; the input gets no gradient.
    data = np.random.randn(20, 10, 5).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        if graphcore:
            o = builder.aiGraphcore.slice([i1], starts=[1000], ends=[1000], axes=[1])
        else:
            consts = [builder.aiOnnx.constant(np.array([v], np.int64)) for v in (1000, 1000, 1)]
            o = builder.aiOnnx.slice([i1, *consts])
        assert builder.getTensorShape(o) == [20, 0, 5]
        builder.addOutputTensor(o)
        return [o, g + i1]

    op_tester.run(init_builder, lambda _: [data[:, 10:10], np.zeros_like(data)], "train")


@pytest.mark.follows("test_slice_end_out_of_bounds")
@GRAPHCORE
def test_slice_end_out_of_bounds(op_tester, graphcore):
    data = np.random.randn(20, 10, 5).astype(np.float32)
    how = "graphcore" if graphcore else "constant"
    _slice(op_tester, data, [1], [1000], [1], how=how, shape=[20, 9, 5], train=True)


@pytest.mark.follows("test_slice_neg_starts_and_ends")
@GRAPHCORE
def test_slice_neg_starts_and_ends(op_tester, graphcore):
    data = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    how = "graphcore" if graphcore else "opset9"
    _slice(op_tester, data, [-5], [-1], [0], how=how, shape=[3] if graphcore else None)


@pytest.mark.follows("test_slice_flip_1")
def test_slice_flip_1(op_tester):
    _slice(op_tester, np.array([1.0, 2.0, 3.0, 4.0], np.float32), [3], [1], [0], [-1])


@pytest.mark.follows("test_slice_flip_2")
def test_slice_flip_2(op_tester):
    _slice(op_tester, np.array([1.0, 2.0, 3.0, 4.0], np.float32), [-1], [-1000], [0], [-1])


def _flip_then_slice(op_tester, start, end, step):
    data = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)

        def const(v):
            return builder.aiOnnx.constant(np.array([v], np.int64))

        o = builder.aiOnnx.slice([i1, const(start), const(end), const(0), const(step)])
        o = builder.aiOnnx.slice([o, const(1), const(3), const(0)])
        builder.addOutputTensor(o)
        return [o, g + i1, g + o]

    def reference(ref_data):
        # Positions of the input that the two slices pick, in output order.
        picked = np.arange(5)[start:end:step][1:3]
        grad = np.zeros_like(data)
        np.add.at(grad, picked, ref_data.getOutputTensorGrad(0))
        return [data[picked], grad, None]

    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_slice_flip_grad_1")
def test_slice_flip_grad_1(op_tester):
    op_tester.setPatterns(["PreUniRepl"], enableRuntimeAsserts=False)
    _flip_then_slice(op_tester, 4, 1, -1)


D3x4 = np.arange(1, 13).astype(np.float32).reshape(3, 4)


@pytest.mark.follows("test_slice_positive_step")
def test_slice_positive_step(op_tester):
    op_tester.setPatterns(["Slice2SliceSubsample"], enableRuntimeAsserts=False)
    _slice(op_tester, D3x4, [1, -4], [13, 3], [0, 1], [2, 2])
    assert np.array_equal(D3x4[_index(2, [1, -4], [13, 3], [0, 1], [2, 2])], [[5.0, 7.0]])


@pytest.mark.follows("test_slice_neg_step")
def test_slice_neg_step(op_tester):
    op_tester.setPatterns(["Slice2SliceSubsample"], enableRuntimeAsserts=False)
    _slice(op_tester, D3x4, [-1, -2], [-9527, 0], [0, 1], [-2, -1])
    expected = [[11.0, 10.0], [3.0, 2.0]]
    assert np.array_equal(D3x4[_index(2, [-1, -2], [-9527, 0], [0, 1], [-2, -1])], expected)


@pytest.mark.follows("test_slice_flip_grad_2")
def test_slice_flip_grad_2(op_tester):
    op_tester.setPatterns(["PreUniRepl", "Slice2SliceSubsample"], enableRuntimeAsserts=False)
    _flip_then_slice(op_tester, 4, -6, -2)


@pytest.mark.follows("test_slice_negative_axis")
def test_slice_negative_axis(op_tester):
    def init_builder(builder):
        consts = [
            builder.aiOnnx.constant(np.array(v, np.int64)) for v in ([1, 0], [2, 3], [-2, -1])
        ]
        builder.addInputTensor(D2x4)  # the original adds one input it does not use
        i1 = builder.addInputTensor(D2x4)
        o = builder.aiOnnx.slice([i1, *consts])
        builder.addOutputTensor(o)
        return [o]

    op_tester.run(init_builder, lambda _: [D2x4[1:2, 0:3]], "infer")
