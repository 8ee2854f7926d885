"""graphcore/popart tests/integration/operators_test/pooling_test.py: AveragePool (without
counting padding; counting it refused in training; a pads vector of the wrong length
refused), MaxPool (padded, strided, float16, ceil mode, its gradient; dilations refused),
the 1x1 identity cases, and GlobalMax/AveragePool in 2-D and 3-D with gradients (Cpu)."""

import itertools

import numpy as np
import pytest
from popart_op_checks import check_op

import popart


def pool2d(x, kernel, strides, pads=(0, 0, 0, 0), kind="max", ceil=False, upstream=None):
    """NCHW pooling by windows (padding never counted; the last window of ceil mode may
    overhang); with `upstream`, the input's gradient instead."""
    n, c, h, w = x.shape
    top, left, bottom, right = pads
    rounding = np.ceil if ceil else np.floor
    out_h = int(rounding((h + top + bottom - kernel[0]) / strides[0])) + 1
    out_w = int(rounding((w + left + right - kernel[1]) / strides[1])) + 1
    out = np.zeros((n, c, out_h, out_w), np.float64)
    grad = np.zeros(x.shape, np.float64)
    for i, j in itertools.product(range(out_h), range(out_w)):
        r0, c0 = i * strides[0] - top, j * strides[1] - left
        rows = slice(max(r0, 0), min(r0 + kernel[0], h))
        cols = slice(max(c0, 0), min(c0 + kernel[1], w))
        window = x[:, :, rows, cols].astype(np.float64).reshape(n, c, -1)
        if kind == "max":
            out[:, :, i, j] = window.max(-1)
            if upstream is not None:
                first = window.argmax(-1)
                width = cols.stop - cols.start
                for a, b in itertools.product(range(n), range(c)):
                    r, q = divmod(int(first[a, b]), width)
                    grad[a, b, rows.start + r, cols.start + q] += upstream[a, b, i, j]
        else:
            out[:, :, i, j] = window.mean(-1)
            if upstream is not None:
                grad[:, :, rows, cols] += (upstream[:, :, i, j] / window.shape[-1])[..., None, None]
    return (grad if upstream is not None else out).astype(x.dtype)


def _run(op_tester, data, add_op, forward, train=False, patterns=None):
    if patterns is not None:
        op_tester.setPatterns(patterns, enableRuntimeAsserts=False)

    def gradient(x, upstream):
        return forward(x, upstream=upstream)

    check_op(op_tester, data, add_op, forward, gradient if train else None)


def _average(kernel, pads, strides):
    def add_op(builder, i1):
        return builder.aiOnnx.averagepool(
            [i1], kernel_shape=kernel, count_include_pad=0, pads=pads, strides=strides
        )

    return add_op


def _max(kernel, pads, strides, opset10=False, **extra):
    def add_op(builder, i1):
        maxpool = builder.aiOnnxOpset10.maxpool if opset10 else builder.aiOnnx.maxpool
        (o,) = maxpool(
            [i1], num_outputs=1, kernel_shape=kernel, pads=pads, storage_order=0,
            strides=strides, **extra,
        )  # fmt: skip
        return o

    return add_op


def _avg_ref(kernel, pads, strides):
    return lambda x, upstream=None: pool2d(
        x, kernel, strides, (pads[0], pads[1], pads[2], pads[3]), "avg", upstream=upstream
    )  # noqa: E501


def _max_ref(kernel, pads, strides, ceil=False):
    return lambda x, upstream=None: pool2d(x, kernel, strides, pads, "max", ceil, upstream)


def _rand(*shape, dtype=np.float32):
    return np.random.rand(*shape).astype(dtype)


@pytest.mark.follows("test_average_pool_1")
def test_average_pool_1(op_tester):
    args = ([2, 2], [0, 0, 0, 0], [2, 2])
    _run(op_tester, _rand(1, 1, 6, 6), _average(*args), _avg_ref(*args))


@pytest.mark.follows("test_average_pool_2")
def test_average_pool_2(op_tester):
    args = ([3, 3], [1, 1, 1, 1], [1, 1])
    _run(op_tester, _rand(1, 1, 14, 14), _average(*args), _avg_ref(*args))


@pytest.mark.follows("test_average_pool_3")
def test_average_pool_3(op_tester):
    args = ([3, 3], [0, 0, 0, 0], [2, 2])
    _run(op_tester, _rand(1, 1, 14, 14), _average(*args), _avg_ref(*args))


@pytest.mark.follows("test_average_pool_4")
def test_average_pool_4(op_tester):
    args = ([1, 1], [0, 0, 0, 0], [1, 1])
    data = _rand(4, 256, 6, 6, dtype=np.float16)
    _run(op_tester, data, _average(*args), lambda x: x, patterns=["OpToIdentity"])


@pytest.mark.follows("test_average_pool_fp16")
def test_average_pool_fp16(op_tester):
    args = ([3, 3], [0, 0, 0, 0], [2, 2])
    op_tester.atol, op_tester.rtol = 1e-3, 1e-3
    _run(op_tester, _rand(1, 1, 14, 14, dtype=np.float16), _average(*args), _avg_ref(*args))


@pytest.mark.follows("test_average_pool_with_count_include_pad")
def test_average_pool_with_count_include_pad():
    builder = popart.Builder()
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 14, 14]))
    o = builder.aiOnnx.averagepool(
        [i1], kernel_shape=[3, 3], count_include_pad=1, pads=[0, 0, 0, 0], strides=[2, 2]
    )
    builder.addOutputTensor(o)
    builder.removeNodeAttribute("count_include_pad", set([o]))
    builder.addNodeAttribute("count_include_pad", 1, set([o]))
    loss = builder.aiGraphcore.l1loss([o], 0.1)
    with pytest.raises(popart.popart_exception) as e_info:
        popart.TrainingSession(
            fnModel=builder.getModelProto(),
            dataFlow=popart.DataFlow(1, {o: popart.AnchorReturnType("All")}),
            loss=loss,
            optimizer=popart.ConstSGD(0.01),
            userOptions=popart.SessionOptions(),
            deviceInfo=popart.DeviceManager().createCpuDevice(),
        )
    assert e_info.value.args[0].startswith("`count_include_pad` is not supported")


@pytest.mark.follows("test_average_pool_invalid_params")
def test_average_pool_invalid_params():
    builder = popart.Builder()
    i1 = builder.addInputTensor("FLOAT", [1, 1, 14, 14])
    with pytest.raises(popart.popart_exception) as e_info:
        builder.aiOnnx.averagepool(
            [i1], kernel_shape=[3, 3], count_include_pad=1, pads=[0, 0, 0, 0, 0], strides=[2, 2]
        )
    assert e_info.value.args[0].startswith("Padding vector (length 5) does not have")


@pytest.mark.follows("test_maxpool_1")
def test_maxpool_1(op_tester):
    args = ([2, 2], [0, 0, 0, 0], [2, 2])
    _run(op_tester, _rand(1, 1, 16, 16), _max(*args), _max_ref(*args))


@pytest.mark.follows("test_maxpool_2")
def test_maxpool_2(op_tester):
    args = ([3, 3], [1, 1, 1, 1], [1, 1])
    _run(op_tester, _rand(1, 1, 16, 16), _max(*args), _max_ref(*args))


@pytest.mark.follows("test_maxpool_3")
def test_maxpool_3(op_tester):
    args = ([5, 5], [2, 2, 2, 2], [2, 2])
    _run(op_tester, _rand(1, 1, 16, 16), _max(*args), _max_ref(*args))


@pytest.mark.follows("test_maxpool_4")
def test_maxpool_4(op_tester):
    args = ([5, 5], [2, 2, 2, 2], [2, 2])
    _run(op_tester, _rand(1, 1, 16, 16, dtype=np.float16), _max(*args), _max_ref(*args))


@pytest.mark.follows("test_maxpool_5")
def test_maxpool_5(op_tester):
    args = ([1, 1], [0, 0, 0, 0], [1, 1])
    data = _rand(4, 256, 6, 6, dtype=np.float16)
    _run(op_tester, data, _max(*args), lambda x: x, patterns=["OpToIdentity"])


@pytest.mark.follows("test_maxpool_grad")
def test_maxpool_grad(op_tester):
    args = ([2, 2], [0, 0, 0, 0], [2, 2])
    _run(
        op_tester, _rand(1, 1, 6, 6), _max(*args), _max_ref(*args), train=True,
        patterns=["PreUniRepl", "OpToIdentity"],
    )  # fmt: skip


@pytest.mark.follows("test_maxpool10_dilations")
def test_maxpool10_dilations(op_tester):
    add_op = _max([2, 2], [0, 0, 0, 0], [2, 2], opset10=True, ceil_mode=0, dilations=[2, 2])
    with pytest.raises(popart.popart_exception) as e_info:
        _run(op_tester, _rand(1, 1, 16, 16), add_op, lambda x: x)
    assert "Dilations of value other than 1 are currently not supported." in e_info.value.args[0]


@pytest.mark.follows("test_maxpool10_ceil_mode")
def test_maxpool10_ceil_mode(op_tester):
    add_op = _max([3, 3], [0, 0, 0, 0], [2, 2], opset10=True, ceil_mode=1)
    _run(op_tester, _rand(1, 1, 16, 16), add_op, _max_ref([3, 3], (0, 0, 0, 0), [2, 2], True))


@pytest.mark.follows("test_maxpool10_ceil_mode_grad")
def test_maxpool10_ceil_mode_grad(op_tester):
    data = _rand(1, 1, 16, 16)
    reference = _max_ref([3, 3], (0, 0, 0, 0), [2, 2], ceil=True)
    # Ceil mode, and the same by padding the end by hand.
    _run(op_tester, data, _max([3, 3], [0, 0, 0, 0], [2, 2], True, ceil_mode=1), reference, True)
    _run(op_tester, data, _max([3, 3], [0, 0, 1, 1], [2, 2], True, ceil_mode=0), reference, True)


def _global(kind):
    return lambda b, i: getattr(b.aiOnnx, f"global{kind}pool")([i])


def _global_ref(kind):
    def reference(x, upstream=None):
        axes = tuple(range(2, x.ndim))
        if upstream is None:
            return x.max(axes, keepdims=True) if kind == "max" else x.mean(axes, keepdims=True)
        if kind == "max":
            return (x == x.max(axes, keepdims=True)) * upstream
        return np.broadcast_to(upstream / np.prod(x.shape[2:]), x.shape).astype(x.dtype)

    return reference


@pytest.mark.follows("test_globalmaxpool_2d")
def test_globalmaxpool_2d(op_tester):
    _run(op_tester, _rand(1, 1, 6, 6), _global("max"), _global_ref("max"), patterns=["PreUniRepl"])


@pytest.mark.follows("test_globalmaxpool_grad_2d")
def test_globalmaxpool_grad_2d(op_tester):
    _run(
        op_tester, _rand(1, 1, 6, 6), _global("max"), _global_ref("max"), train=True,
        patterns=["PreUniRepl", "OpToIdentity"],
    )  # fmt: skip


@pytest.mark.follows("test_globalmaxpool_3d")
def test_globalmaxpool_3d(op_tester):
    data = _rand(1, 1, 6, 6, 4)
    _run(op_tester, data, _global("max"), _global_ref("max"), patterns=["PreUniRepl"])


@pytest.mark.follows("test_globalaveragepool_2d")
def test_globalaveragepool_2d(op_tester):
    data = _rand(1, 1, 6, 6)
    _run(op_tester, data, _global("average"), _global_ref("avg"), patterns=["PreUniRepl"])


@pytest.mark.follows("test_globalaveragepool_grad_2d")
def test_globalaveragepool_grad_2d(op_tester):
    _run(
        op_tester, _rand(1, 1, 6, 6), _global("average"), _global_ref("avg"), train=True,
        patterns=["PreUniRepl", "OpToIdentity"],
    )  # fmt: skip
