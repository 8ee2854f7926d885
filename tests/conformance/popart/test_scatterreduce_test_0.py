"""graphcore/popart tests/integration/operators_test/scatterreduce_test_0.py: ai.graphcore
ScatterReduce and GroupedScatterReduce, every reduction on torch_scatter's cases, broadcast
vector indices, training gradients, "none" with initial values, shape inference and the
op's errors (IpuModel2). References in numpy (popart_scatterreduce_checks)."""

import numpy as np
import pytest
from popart_scatterreduce_checks import REDUCTION, REDUCTIONS, build, reference

import popart

DEVICE = "IpuModel2"

# torch_scatter 2.0.9's test cases (test/test_scatter.py), as the original takes them.
CASES = [
    ([1, 3, 2, 4, 5, 6], [0, 1, 0, 1, 1, 3], 0,
     {"sum": [3, 12, 0, 6], "mul": [2, 60, 1, 6], "min": [1, 3, 0, 6], "max": [2, 5, 0, 6]}),
    ([[1, 5, 3, 7, 9, 11], [2, 4, 8, 6, 10, 12]], [[0, 1, 0, 1, 1, 3], [0, 0, 1, 0, 1, 2]], 1,
     {"sum": [[4, 21, 0, 11], [12, 18, 12, 0]], "mul": [[3, 315, 1, 11], [48, 80, 12, 1]],
      "min": [[1, 5, 0, 11], [2, 8, 12, 0]], "max": [[3, 9, 0, 11], [6, 10, 12, 0]]}),
    ([[[1, 2], [5, 6], [3, 4]], [[10, 11], [7, 9], [12, 13]]], [[0, 1, 0], [2, 0, 2]], 1,
     {"sum": [[[4, 6], [5, 6], [0, 0]], [[7, 9], [0, 0], [22, 24]]],
      "mul": [[[3, 8], [5, 6], [1, 1]], [[7, 9], [1, 1], [120, 143]]],
      "min": [[[1, 2], [5, 6], [0, 0]], [[7, 9], [0, 0], [10, 11]]],
      "max": [[[3, 4], [5, 6], [0, 0]], [[7, 9], [0, 0], [12, 13]]]}),
]  # fmt: skip


@pytest.mark.follows("test_scatterreduce_basic")
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_scatterreduce_basic(op_tester, case, reduction, dtype):
    src, index, axis, expected = CASES[case]
    src, index = np.array(src, dtype), np.array(index)
    if index.ndim > 1:  # the original expands the indices to the source's shape
        index = np.broadcast_to(
            index.reshape(index.shape + (1,) * (src.ndim - index.ndim)), src.shape
        )
    np.testing.assert_array_equal(
        reference([src], [index], axis, index.max() + 1, reduction)[0], expected[reduction]
    )

    def init_builder(builder):
        return build(builder, src, index, axis, int(index.max()) + 1, reduction)

    op_tester.run(init_builder, lambda _: [np.array(expected[reduction], dtype)])


SRC = np.array([[2, 4, 9], [5, 3, 1], [1, 8, 6], [0, 2, 7]], np.float32)
INDEX = np.array([[2, 1, 0], [1, 0, 1], [0, 2, 1], [1, 2, 2]])
INDEX_2 = np.array([[0, 1, 2], [1, 0, 1], [1, 2, 0], [2, 2, 1]])


@pytest.mark.follows("test_scatterreduce_index_broadcasted")
@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatterreduce_index_broadcasted(op_tester, grouped, reduction):
    srcs, indices = ([SRC, SRC], [INDEX, INDEX_2]) if grouped else ([SRC], [INDEX])

    def init_builder(builder):
        src, index = (np.stack(srcs), np.stack(indices)) if grouped else (SRC, INDEX)
        return build(builder, src, index, 0, 3, reduction, group_size=len(srcs))

    op_tester.run(init_builder, lambda _: reference(srcs, indices, 0, 3, reduction))


@pytest.mark.follows("test_scatterreduce_repro")
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_scatterreduce_repro(op_tester, reduction):
    src = np.ascontiguousarray(np.linspace(-1, 1, 16, dtype=np.float32).reshape(-1, 2).T)
    index = np.zeros_like(src, np.uint32)

    def init_builder(builder):
        d = builder.addInputTensor(src)
        i = builder.addInputTensor(index)
        out = builder.aiGraphcore.scatterreduce(
            [d, i], axis_size=1, axis=0, reduction=REDUCTION[reduction]
        )
        builder.addOutputTensor(out)
        return [out]

    expected = src.max(0, keepdims=True) if reduction == "max" else src.min(0, keepdims=True)
    op_tester.run(init_builder, lambda _: [expected])


@pytest.mark.follows("test_scatterreduce_training")
@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatterreduce_training(op_tester, grouped, reduction):
    srcs = [np.array([5, 1, 7, 2, 3, 2, 1, 3], np.float32)]
    indices = [np.array([0, 0, 1, 0, 2, 2, 3, 3])]
    if grouped:
        srcs.append(np.array([6, 2, 8, 3, 4, 3, 2, 4], np.float32))
        indices.append(np.array([1, 1, 0, 1, 3, 3, 2, 2]))

    def init_builder(builder):
        src, index = (np.stack(srcs), np.stack(indices)) if grouped else (srcs[0], indices[0])
        return build(builder, src, index, 0, 4, reduction, group_size=len(srcs), backward=True)

    def ref(ref_data):
        d_out = ref_data.getOutputTensorGrad(0)
        return reference(srcs, indices, 0, 4, reduction, d_out=d_out)

    op_tester.run(init_builder, ref, "train")


@pytest.mark.follows("test_scatterreduce_indices_data_different_shape")
@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("reduction", ["sum", "mul"])  # the original skips max and min
def test_scatterreduce_indices_data_different_shape(op_tester, grouped, reduction):
    # A [6, 1] index broadcast over a [6, 3] source (the original skips axis_size 2).
    src = np.ones((6, 3), np.float32)
    index = np.array([[0, 1, 1, 3, 2, 0]]).T
    groups = 2 if grouped else 1
    srcs, indices = [src] * groups, [np.broadcast_to(index, src.shape)] * groups

    def init_builder(builder):
        s, i = (np.stack(srcs), np.stack([index] * 2)) if grouped else (src, index)
        return build(builder, s, i, 0, 5, reduction, group_size=groups, backward=True)

    def ref(ref_data):
        d_out = ref_data.getOutputTensorGrad(0)
        return reference(srcs, indices, 0, 5, reduction, d_out=d_out)

    op_tester.run(init_builder, ref, "train")


@pytest.mark.follows("test_scatterreduce_shape_inference")
def test_scatterreduce_shape_inference():
    builder = popart.Builder()
    s = builder.addInputTensor("FLOAT16", [10, 10, 64])
    i = builder.addInputTensor("UINT32", [10, 10, 64])
    t = builder.aiGraphcore.scatterreduce([s, i], axis=1, axis_size=5)
    assert builder.getTensorShape(t) == [10, 5, 64]
    assert builder.getTensorDtypeString(t) == "float16"


def _refused(op_tester, src_shape, index_shape, message, **attributes):
    def init_builder(builder):
        s = builder.addInputTensor(np.ones(src_shape, np.float32))
        i = builder.addInputTensor(np.zeros(index_shape, np.uint32))
        return [builder.aiGraphcore.scatterreduce([s, i], **attributes)]

    with pytest.raises(popart.popart_exception) as e_info:
        op_tester.run(init_builder, None)
    assert message in e_info.value.args[0]


@pytest.mark.follows("test_scatterreduce_bad_axis")
def test_scatterreduce_bad_axis(op_tester):
    message = "axis = 4 is outside the acceptable range"
    _refused(op_tester, [2, 3, 4], [2, 3, 4], message, axis=4, axis_size=5)


@pytest.mark.follows("test_scatterreduce_bad_axis_size")
def test_scatterreduce_bad_axis_size(op_tester):
    _refused(op_tester, [2, 3, 4], [2, 3, 4], "axis_size = 0 is not valid", axis_size=0)


@pytest.mark.follows("test_scatterreduce_indices_data_different_bad_shape")
def test_scatterreduce_indices_data_different_bad_shape(op_tester):
    message = "Failed to expand 'indices' shape "
    _refused(op_tester, [6, 3], [6, 4], message, axis=0, axis_size=5)


@pytest.mark.follows("test_scatterreduce_invalid_indices_rank")
def test_scatterreduce_invalid_indices_rank(op_tester):
    message = "Invalid rank for indices input."
    _refused(op_tester, [3, 4], [3, 4, 1], message, axis=0, axis_size=5)


@pytest.mark.follows("test_scatterreduce_partial_broadcasting")
def test_scatterreduce_partial_broadcasting(op_tester):
    message = "Partial broadcasting of indices is not currently supported"
    _refused(op_tester, [6, 3, 5], [1, 3, 5], message, axis=0, axis_size=5)


@pytest.mark.follows("test_scatterreduce_none")
@pytest.mark.parametrize("grouped", [True, False])
def test_scatterreduce_none(op_tester, grouped):
    # Zeros scattered over ones with "none": the scattered rows' initial values get no gradient.
    groups = 2 if grouped else 1
    src = np.zeros((16, 32), np.float32)
    index = np.broadcast_to(np.arange(16).reshape(16, 1), (16, 32))
    initial = np.ones((100, 32), np.float32)

    def init_builder(builder):
        stack = (lambda a: np.stack([a] * 2)) if grouped else (lambda a: a)
        return build(
            builder, stack(src), stack(index), 0, 100, "none", stack(initial), groups, backward=True
        )

    def ref(ref_data):
        d_out = ref_data.getOutputTensorGrad(0)
        return reference(
            [src] * groups, [index] * groups, 0, 100, "none", [initial] * groups, d_out
        )

    op_tester.run(init_builder, ref, "train")
