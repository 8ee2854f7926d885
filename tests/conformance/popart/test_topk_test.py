"""graphcore/popart tests/integration/operators_test/topk_test.py: TopK along either axis,
largest or smallest, sorted, with ties, and its gradient (sorted or not) (Cpu)."""

import numpy as np
import pytest

import popart

K = 4
OPSETS_11 = {"ai.onnx": 11, "ai.graphcore": 1}


def _topk(data, k, axis, largest=True):
    # A stable sort keeps the lower index first among ties, as torch.topk does here.
    order = np.argsort(-data if largest else data, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(data, indices, axis=axis), indices


def _topk_grad(data, indices, axis, upstream):
    grad = np.zeros_like(data)
    np.put_along_axis(grad, indices, upstream, axis=axis)
    return grad


def _run(op_tester, axis, largest=None, train=False, opsets=None, sort=None):
    data = np.random.rand(7, 8).astype(np.float32) * 10
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        k_t = builder.aiOnnx.constant(np.array([K], np.int64))
        kwargs = {"axis": axis} if largest is None else {"axis": axis, "largest": int(largest)}
        if sort is not None:
            kwargs["sorted"] = sort
        vals, inds = builder.aiOnnx.topk([i1, k_t], **kwargs)
        builder.addOutputTensor(vals)
        return [vals, inds, g + i1, g + vals] if train else [vals, inds]

    def reference(ref_data):
        values, indices = _topk(data, K, axis, largest is not False)
        if not train:
            return [values, indices]
        grad = _topk_grad(data, indices, axis, ref_data.getOutputTensorGrad(0))
        return [values, indices, grad, None]

    op_tester.check_dtypes = False  # the indices' type (the original compares with torch)
    op_tester.run(init_builder, reference, "train" if train else "infer", opsets=opsets)


@pytest.mark.follows("test_topk_2d")
@pytest.mark.parametrize("dim", [0, 1])
def test_topk_2d(op_tester, dim):
    _run(op_tester, dim)


@pytest.mark.follows("test_topk_2d_smallest")
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_2d_smallest(op_tester, dim, largest):
    _run(op_tester, dim, largest, opsets=OPSETS_11, sort=1)


@pytest.mark.follows("test_topk_2d_grad")
@pytest.mark.parametrize("dim", [0, 1])
def test_topk_2d_grad(op_tester, dim):
    _run(op_tester, dim, train=True)


@pytest.mark.follows("test_topk_2d_smallest_grad")
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_2d_smallest_grad(op_tester, dim, largest):
    _run(op_tester, dim, largest, train=True, opsets=OPSETS_11)


@pytest.mark.follows("test_topk_2d_unsorted_grad")
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_2d_unsorted_grad(op_tester, dim, largest):
    data = np.random.rand(7, 8).astype(np.float32) * 10
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        k_t = builder.aiOnnx.constant(np.array([K], np.int64))
        vals, inds = builder.aiOnnx.topk([i1, k_t], axis=dim, largest=int(largest), sorted=0)
        builder.setAvailableMemoryProportion({vals, inds}, 0.9)
        builder.addOutputTensor(vals)
        return [vals, inds, g + i1, g + vals]

    def reference(ref_data):
        # The values come in no given order, but the mean loss gives each the same
        # gradient, which lands on the places of the k largest (smallest).
        d__o = ref_data.getOutputTensorGrad(0)
        assert np.all(d__o == d__o.flat[0])
        _, indices = _topk(data, K, dim, largest)
        return [None, None, _topk_grad(data, indices, dim, d__o), None]

    op_tester.check_dtypes = False
    op_tester.run(init_builder, reference, "train", opsets=OPSETS_11)


@pytest.mark.follows("test_topk_duplicates")
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_duplicates(op_tester, dim, largest):
    data = np.array(
        [
            [0.2500, 0.3536, 0.5590, 4.0156, 4.0156, 4.0774],
            [0.5590, 0.3536, 0.2500, 4.0774, 4.0156, 4.0156],
            [4.0389, 4.0620, 4.1003, 0.5000, 0.7071, 1.1180],
            [4.1003, 4.0620, 4.0389, 1.1180, 0.5000, 0.7071],
        ],
        np.float32,
    )

    def init_builder(builder):
        i1 = builder.addInputTensor(data)
        k_t = builder.aiOnnx.constant(np.array([2], np.int64))
        vals, _ = builder.aiOnnx.topk([i1, k_t], axis=dim, largest=int(largest), sorted=1)
        builder.addOutputTensor(vals)
        return [vals]

    op_tester.run(init_builder, lambda _: [_topk(data, 2, dim, largest)[0]], opsets=OPSETS_11)
