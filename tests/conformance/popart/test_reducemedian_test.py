"""graphcore/popart tests/integration/operators_test/reducemedian_test.py: ai.graphcore
ReduceMedian's values (against numpy.median over odd counts) and indices (against the
lower median's position, as torch.median gives them), over one or several axes, kept or
not, in float32 and int32; its gradient (the upstream gradient scattered to the median's
position); and the shapes the Builder infers for both outputs (Cpu)."""

import numpy as np
import pytest

import popart
from conftest import create_test_device

TYPES = [np.float32, np.int32]
KEEPDIMS = [False, True]
# The original runs every subset of the four axes (and the default); a sample of them,
# each size of subset and the default, keeps the test fast.
VALUE_AXES = [None, (), (2,), (1, 3), (0, 2, 3), (0, 1, 2, 3)]
G = popart.reservedGradientPrefix()


def _data(dtype, shape, unique=False):
    if np.issubdtype(dtype, np.integer):
        if unique:
            return np.random.default_rng(0).choice(10000, size=shape, replace=False).astype(dtype)
        return np.random.randint(100, size=shape, dtype=dtype)
    return np.random.randn(*shape).astype(dtype)


def _median_index(data, axis, keepdims):
    """The position of the lower median along `axis` (torch.median's indices)."""
    n = data.shape[axis]
    order = np.argsort(data, axis=axis, kind="stable")
    index = np.take(order, [(n - 1) // 2], axis=axis)
    return (index if keepdims else np.squeeze(index, axis=axis)).astype(np.int32)


def _build(builder, data, axes, keepdims):
    tensor = builder.addInputTensor(data)
    return tensor, builder.aiGraphcore.reducemedian([tensor], axes=axes, keepdims=keepdims)


@pytest.mark.follows("test_reducemedian_values")
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("keepdims", KEEPDIMS)
@pytest.mark.parametrize("axes", VALUE_AXES)
def test_reducemedian_values(op_tester, dtype, keepdims, axes):
    # Odd counts over every subset of axes: numpy averages the two middle values otherwise.
    data = _data(dtype, [1, 3, 5, 7])

    def init_builder(builder):
        _, out = _build(builder, data, axes, keepdims)
        builder.addOutputTensor(out[0])
        return [out[0]]

    expected = np.median(data, axis=axes, keepdims=keepdims).astype(dtype)
    op_tester.run(init_builder, lambda _: [expected], "infer")


@pytest.mark.follows("test_reducemedian_indices_1")
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("keepdims", KEEPDIMS)
@pytest.mark.parametrize("axis", [0, 1, 2, 3, 4])
def test_reducemedian_indices_1(op_tester, dtype, keepdims, axis):
    data = _data(dtype, [1, 3, 4, 7, 8], unique=True)

    def init_builder(builder):
        _, out = _build(builder, data, [axis], keepdims)
        builder.addOutputTensor(out[1])
        return [out[1]]

    op_tester.run(init_builder, lambda _: [_median_index(data, axis, keepdims)], "infer")


SMALL = np.arange(15).reshape(3, 5)


@pytest.mark.follows("test_reducemedian_indices_2")
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("keepdims", KEEPDIMS)
@pytest.mark.parametrize("axes", [[0, 1], None])
def test_reducemedian_indices_2(op_tester, dtype, keepdims, axes):
    # Over several axes the index is into the flattened reduced axes: 7 is at 7.
    def init_builder(builder):
        _, out = _build(builder, SMALL.astype(dtype), axes, keepdims)
        builder.addOutputTensor(out[1])
        return [out[1]]

    expected = np.array(7, np.int32).reshape((1, 1) if keepdims else ())
    op_tester.run(init_builder, lambda _: [expected], "infer")


def _train(op_tester, data, axes, keepdims, expected_median, expected_grad):
    def init_builder(builder):
        tensor, out = _build(builder, data, axes, keepdims)
        total = builder.aiOnnx.reducesum([out[0]], keepdims=False)
        builder.addOutputTensor(total)
        return [total, out[0], G + tensor]

    dtype = data.dtype
    expected = [np.asarray(expected_median.sum(), dtype), expected_median, expected_grad]
    op_tester.run(init_builder, lambda _: expected, "train")


def _train_single_axis(op_tester, dtype, keepdims, axis):
    data = _data(dtype, [3, 4, 7, 8], unique=True)
    index = _median_index(data, axis, keepdims=True)
    median = np.take_along_axis(data, index, axis=axis)
    grad = np.zeros(data.shape, dtype)
    np.put_along_axis(grad, index, 1, axis=axis)
    _train(op_tester, data, [axis], keepdims, median if keepdims else median.squeeze(axis), grad)


def _train_several_axes(op_tester, dtype, keepdims, axes):
    grad = np.zeros(SMALL.shape, dtype)
    grad[1, 2] = 1
    median = np.array(7, dtype).reshape((1, 1) if keepdims else ())
    _train(op_tester, SMALL.astype(dtype), axes, keepdims, median, grad)


@pytest.mark.follows("test_reducemedian_training_1")
@pytest.mark.parametrize("keepdims", KEEPDIMS)
@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_reducemedian_training_1(op_tester, keepdims, axis):
    _train_single_axis(op_tester, np.float32, keepdims, axis)


@pytest.mark.follows("test_reducemedian_training_1")
@pytest.mark.parametrize("keepdims", KEEPDIMS)
def test_reducemedian_training_1_int32(op_tester, keepdims):
    _train_single_axis(op_tester, np.int32, keepdims, 1)


@pytest.mark.follows("test_reducemedian_training_2")
@pytest.mark.parametrize("keepdims", KEEPDIMS)
@pytest.mark.parametrize("axes", [[0, 1], None])
def test_reducemedian_training_2(op_tester, keepdims, axes):
    _train_several_axes(op_tester, np.float32, keepdims, axes)


@pytest.mark.follows("test_reducemedian_training_2")
@pytest.mark.parametrize("keepdims", KEEPDIMS)
def test_reducemedian_training_2_int32(op_tester, keepdims):
    _train_several_axes(op_tester, np.int32, keepdims, None)


def _check_inferred_shapes(data, axes, keepdims):
    """The shapes the Builder infers for both outputs are those a training run returns."""
    builder = popart.Builder()
    tensor = builder.addInputTensor(popart.TensorInfo(data))
    out = builder.aiGraphcore.reducemedian([tensor], axes=axes, keepdims=keepdims)
    builder.addOutputTensor(out[0])
    builder.addOutputTensor(out[1])
    loss = builder.aiGraphcore.identityloss([out[0]])
    shapes = [tuple(builder.getTensorShape(a)) for a in out]
    options = popart.SessionOptions()
    options.enableStochasticRounding = False
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        loss=loss,
        dataFlow=popart.DataFlow(1, {a: popart.AnchorReturnType("All") for a in out}),
        deviceInfo=create_test_device("IpuModel"),
        optimizer=popart.ConstSGD(0.01),
        userOptions=options,
    )
    anchors = session.initAnchorArrays()
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO({tensor: data}, anchors))
    assert [anchors[a].shape for a in out] == shapes


@pytest.mark.follows("test_reducemedian_values_shape_infer")
@pytest.mark.parametrize("keepdims", KEEPDIMS)
@pytest.mark.parametrize("axes", [None, (1,), (0, 2), (0, 1, 2, 3)])
def test_reducemedian_values_shape_infer(keepdims, axes):
    _check_inferred_shapes(np.random.randn(1, 3, 5, 7).astype(np.float32), axes, keepdims)


@pytest.mark.follows("test_reducemedian_indices_1_shape_infer")
@pytest.mark.parametrize("keepdims", KEEPDIMS)
@pytest.mark.parametrize("axis", [0, 4])
def test_reducemedian_indices_1_shape_infer(keepdims, axis):
    _check_inferred_shapes(np.random.randn(1, 3, 4, 7, 8).astype(np.float32), [axis], keepdims)


@pytest.mark.follows("test_reducemedian_shape_infer")
def test_reducemedian_shape_infer():
    builder = popart.Builder()
    tensor = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 3, 4, 7, 8]))
    out = builder.aiGraphcore.reducemedian([tensor], axes=[2], keepdims=False)
    assert builder.getTensorShape(out[0]) == [1, 3, 7, 8]
    assert builder.getTensorShape(out[1]) == [1, 3, 7, 8]
