"""graphcore/popart tests/integration/operators_test/dynamicslice_test.py: ai.graphcore
DynamicSlice at run-time offsets, with or without a given slice tensor, on leading and
several axes, followed by a MatMul, its gradient, and overlapping slices with and without
noOverlap (Cpu)."""

import numpy as np
import pytest

import popart


def _infer(op_tester, data, slices, axes, sizes, slice_shape=None, matmul_by=None):
    """Slice `data` at each offset list in `slices` (optionally into a given zero tensor of
    `slice_shape`, optionally multiplied by `matmul_by`)."""

    def init_builder(builder):
        tensor = builder.addInputTensor(data)
        outputs = []
        for offsets in slices:
            index = builder.addInputTensor(np.asarray(offsets, np.uint32))
            inputs = [tensor, index]
            if slice_shape is not None:
                inputs.append(
                    builder.aiGraphcore.init(
                        slice_shape, popart.DataType.FLOAT, popart.InitType.Zero, "slice_input"
                    )
                )
            out = builder.aiGraphcore.dynamicslice(inputs, axes=axes, sizes=sizes, noOverlap=True)
            if matmul_by is not None:
                out = builder.aiOnnx.matmul([out, builder.addInputTensor(matmul_by)])
            builder.addOutputTensor(out)
            outputs.append(out)
        return outputs

    def reference(_):
        results = []
        for offsets in slices:
            index = [slice(None)] * data.ndim
            for axis, offset, size in zip(axes, offsets, sizes, strict=True):
                index[axis] = slice(offset, offset + size)
            piece = data[tuple(index)]
            if slice_shape is not None:
                piece = piece.reshape(slice_shape)
            results.append(piece @ matmul_by if matmul_by is not None else piece)
        return results

    op_tester.setPatterns(popart.PatternsLevel.All, enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "infer")


@pytest.mark.follows("test_dynamicslice")
@pytest.mark.parametrize("slice_input", [False, True])
def test_dynamicslice(op_tester, slice_input):
    data = np.random.rand(5, 12, 7).astype(np.float32)
    shape = [5, 3, 7] if slice_input else None
    _infer(op_tester, data, [[i * 3] for i in range(4)], [1], [3], slice_shape=shape)


@pytest.mark.follows("test_dynamicslice_no_leading_slice_dim")
def test_dynamicslice_no_leading_slice_dim(op_tester):
    data = np.random.rand(5, 12, 7).astype(np.float32)
    _infer(op_tester, data, [[i] for i in range(5)], [0], [1], slice_shape=[12, 7])


@pytest.mark.follows("test_multi_dim_dynamicslice_create_input_tensor")
def test_multi_dim_dynamicslice_create_input_tensor(op_tester):
    data = np.random.rand(3, 5, 11, 7).astype(np.float32)
    _infer(op_tester, data, [[1, 3]], [0, 3], [2, 4])


@pytest.mark.follows("test_multi_dim_dynamicslice_unwind_tensor_layout")
def test_multi_dim_dynamicslice_unwind_tensor_layout(op_tester):
    data = np.random.rand(3, 5, 11, 7).astype(np.float32)
    multiplier = np.random.rand(2, 5, 4, 11).astype(np.float32)
    op_tester.rtol = 1e-5
    _infer(op_tester, data, [[1, 3]], [0, 3], [2, 4], matmul_by=multiplier)


def _scaled_slices_sum(op_tester, data, offsets, size, no_overlap, fix=None):
    """Sum of slices i (at offsets[i], scaled by i + 1) of a weight; the weight's gradient
    is each slice's scale times the upstream gradient, summed where slices overlap."""
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        tensor = builder.addInitializedInputTensor(data)
        outputs = []
        for i, offset in enumerate(offsets):
            index = builder.addInputTensor(np.asarray([offset] + [0] * 0, np.uint32))
            out = builder.aiGraphcore.dynamicslice(
                [tensor, index], axes=[data.ndim - 2 if data.ndim > 1 else 0], sizes=[size],
                noOverlap=no_overlap,
            )  # fmt: skip
            outputs.append(builder.aiGraphcore.scale([out], float(1 + i)))
        total = builder.aiOnnx.sum(outputs)
        total = builder.aiOnnx.reducesum([total], axes=list(range(data.ndim)), keepdims=False)
        total = builder.aiOnnx.unsqueeze([total], axes=[0])
        builder.addOutputTensor(total)
        return [total, g + total, g + tensor, *outputs]

    axis = data.ndim - 2 if data.ndim > 1 else 0

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        grad = np.zeros_like(data)
        slices = []
        for i, offset in enumerate(offsets):
            index = [slice(None)] * data.ndim
            index[axis] = slice(offset, offset + size)
            slices.append(data[tuple(index)] * (1 + i))
            grad[tuple(index)] += (1 + i) * d__o[0]
        if fix is not None:
            grad += fix
        total = np.array([sum(s.sum() for s in slices)], np.float32)
        return [total, d__o, grad, *slices]

    op_tester.setPatterns(popart.PatternsLevel.All, enableRuntimeAsserts=False)
    op_tester.rtol = 1e-5
    op_tester.run(init_builder, reference, "train")


@pytest.mark.follows("test_dynamicslice_training")
def test_dynamicslice_training(op_tester):
    data = np.random.rand(5, 12, 7).astype(np.float32)
    _scaled_slices_sum(op_tester, data, [0, 3, 6, 9], 3, True)


@pytest.mark.follows("test_dynamicslice_overlap_wrong")
def test_dynamicslice_overlap_wrong(op_tester):
    # The original's expected gradient: the true one less 1 where the slices overlap, as the
    # later slice's gradient (2) is written over the earlier one's (1) there.
    fix = np.array([0, 0, 0, -1, -1, 0, 0, 0, 0, 0], np.float32)
    _scaled_slices_sum(op_tester, np.random.rand(10).astype(np.float32), [0, 3], 5, True, fix)


@pytest.mark.follows("test_dynamicslice_overlap_correct")
def test_dynamicslice_overlap_correct(op_tester):
    _scaled_slices_sum(op_tester, np.random.rand(10).astype(np.float32), [0, 3], 5, False)


@pytest.mark.follows("test_non_sum_add_grad_op")
def test_non_sum_add_grad_op(op_tester):
    data = np.random.rand(4).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        tensor = builder.addInitializedInputTensor(data)
        start = builder.addInputTensor(np.asarray(0).astype(np.uint32))
        bias = builder.addInitializedInputTensor(np.asarray(1).astype(np.float32))
        shape_c = builder.aiOnnx.constant(np.array([2, 2], np.int64))
        out = builder.aiOnnx.reshape([builder.aiOnnx.add([tensor, bias]), shape_c])
        out = builder.aiGraphcore.dynamicslice([out, start], axes=[0], sizes=[2], noOverlap=True)
        total = builder.aiOnnx.reducesum([out], axes=[0, 1], keepdims=False)
        builder.addOutputTensor(total)
        return [total, g + total, g + tensor]

    def reference(ref_data):
        d__o = ref_data.getOutputTensorGrad(0)
        return [np.float32((data + 1).sum()), d__o, np.full(4, d__o, np.float32)]

    op_tester.setPatterns(popart.PatternsLevel.All, enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train")
