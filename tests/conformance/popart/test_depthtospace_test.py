"""graphcore/popart tests/integration/operators_test/depthtospace_test.py: DepthToSpace in
CRD and DCR modes (opset 11, opset 6 and ai.graphcore), SpaceToDepth (its inverse for DCR),
their gradients, and PixelShuffle (CRD) for block sizes 2 and 3 (Cpu)."""

import numpy as np
import pytest
from popart_op_checks import check_op


def depth_to_space(x, blocks, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, blocks, blocks, c // blocks**2, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // blocks**2, blocks, blocks, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // blocks**2, h * blocks, w * blocks)


def space_to_depth(x, blocks):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // blocks, blocks, w // blocks, blocks).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * blocks**2, h // blocks, w // blocks)


def _permutation_grad(permute, shape, upstream):
    """The gradient of an op that only moves elements: each input element gets the upstream
    gradient of the place it moved to."""
    moved = permute(np.arange(np.prod(shape)).reshape(shape))
    grad = np.zeros(int(np.prod(shape)), upstream.dtype)
    grad[moved.reshape(-1)] = upstream.reshape(-1)
    return grad.reshape(shape)


def _run(op_tester, data, add_op, permute, train=False):
    def gradient(x, upstream):
        return _permutation_grad(permute, x.shape, upstream)

    check_op(op_tester, data, add_op, permute, gradient if train else None)


def _d1():
    return np.random.rand(1, 8, 2, 3).astype(np.float32)


def _onnx11(mode, blocks=2):
    return lambda b, i: b.aiOnnxOpset11.depthtospace([i], blocksize=blocks, mode=mode)


@pytest.mark.follows("test_depthtospace")
def test_depthtospace(op_tester):
    _run(op_tester, _d1(), _onnx11("CRD"), lambda x: depth_to_space(x, 2, "CRD"))


@pytest.mark.follows("test_depthtospace1")
def test_depthtospace1(op_tester):
    _run(op_tester, _d1(), _onnx11("DCR"), lambda x: depth_to_space(x, 2, "DCR"))


@pytest.mark.follows("test_depthtospace_opset1")
def test_depthtospace_opset1(op_tester):
    # Before opset 11 there is only DCR.
    add_op = lambda b, i: b.aiOnnxOpset6.depthtospace([i], blocksize=2)  # noqa: E731
    _run(op_tester, _d1(), add_op, lambda x: depth_to_space(x, 2, "DCR"))


@pytest.mark.follows("test_depthtospace_custom_op")
def test_depthtospace_custom_op(op_tester):
    add_op = lambda b, i: b.aiGraphcore.depthtospace([i], blocksize=2, mode="DCR")  # noqa: E731
    _run(op_tester, _d1(), add_op, lambda x: depth_to_space(x, 2, "DCR"))


@pytest.mark.follows("test_depthtospace_grad0")
def test_depthtospace_grad0(op_tester):
    _run(op_tester, _d1(), _onnx11("CRD"), lambda x: depth_to_space(x, 2, "CRD"), train=True)


@pytest.mark.follows("test_depthtospace_grad1")
def test_depthtospace_grad1(op_tester):
    _run(op_tester, _d1(), _onnx11("DCR"), lambda x: depth_to_space(x, 2, "DCR"), train=True)


@pytest.mark.follows("test_spacetodepth0")
def test_spacetodepth0(op_tester):
    def add_op(builder, i1):
        o1 = builder.aiOnnxOpset11.depthtospace([i1], blocksize=2, mode="DCR")
        return builder.aiOnnx.spacetodepth([o1], blocksize=2)

    _run(op_tester, _d1(), add_op, lambda x: x)


@pytest.mark.follows("test_spacetodepth1")
def test_spacetodepth1(op_tester):
    data = np.random.rand(1, 2, 4, 6).astype(np.float32)
    add_op = lambda b, i: b.aiOnnx.spacetodepth([i], blocksize=2)  # noqa: E731
    _run(op_tester, data, add_op, lambda x: space_to_depth(x, 2))


@pytest.mark.follows("test_spacetodepth_grad1")
def test_spacetodepth_grad1(op_tester):
    data = np.random.rand(1, 2, 4, 6).astype(np.float32)
    add_op = lambda b, i: b.aiOnnx.spacetodepth([i], blocksize=2)  # noqa: E731
    _run(op_tester, data, add_op, lambda x: space_to_depth(x, 2), train=True)


def _pixel_shuffle(x, r):
    """torch.nn.PixelShuffle: out[n, c, h*r + i, w*r + j] = x[n, c*r*r + i*r + j, h, w]."""
    n, c, h, w = x.shape
    out = np.empty((n, c // r**2, h * r, w * r), x.dtype)
    for i in range(r):
        for j in range(r):
            out[:, :, i::r, j::r] = x[:, i * r + j :: r * r]
    return out


def _pixel_shuffles(op_tester, add_op):
    for data, blocks in ((_d1(), 2), (np.random.rand(1, 9, 4, 4).astype(np.float32), 3)):
        _run(op_tester, data, add_op(blocks), lambda x, r=blocks: _pixel_shuffle(x, r))


@pytest.mark.follows("test_pixelshuffle0")
def test_pixelshuffle0(op_tester):
    _pixel_shuffles(op_tester, lambda blocks: _onnx11("CRD", blocks))


@pytest.mark.follows("test_pixelshuffle_custom")
def test_pixelshuffle_custom(op_tester):
    _pixel_shuffles(
        op_tester,
        lambda blocks: (
            lambda b, i: b.aiGraphcoreOpset1.depthtospace([i], blocksize=blocks, mode="CRD")
        ),
    )
