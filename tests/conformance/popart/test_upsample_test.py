"""graphcore/popart tests/integration/operators_test/upsample_test.py: Upsample-9 (nearest,
lowered as Resize) by integer and fractional scales, multiplied by a second input, and its
gradient, against numpy's nearest-neighbour indexing as torch's interpolate does it (Cpu)."""

import numpy as np
import pytest

import popart


def _nearest_indices(size, scale):
    """Output size floor(size * scale); output i reads input floor(i / scale)."""
    out = int(size * scale)
    return np.minimum((np.arange(out) / np.float32(scale)).astype(np.int64), size - 1)


def _run(op_tester, data_shape, scales):
    data = np.random.rand(1, 1, *data_shape).astype(np.float32)
    scales = np.array([1.0, 1.0, *scales], dtype=np.float32)
    rows = _nearest_indices(data_shape[0], scales[2])
    cols = _nearest_indices(data_shape[1], scales[3])
    x_data = np.random.rand(1, 1, len(rows), len(cols)).astype(np.float32)
    g = popart.reservedGradientPrefix()

    def init_builder(builder):
        d = builder.addInputTensor(data)
        x = builder.addInputTensor(x_data)
        o = builder.aiOnnx.upsample([d, builder.aiOnnx.constant(scales)])
        o = builder.aiOnnx.mul([o, x])
        builder.addOutputTensor(o)
        return [o, g + d, g + o]

    def reference(ref_data):
        upsampled = data[:, :, rows][:, :, :, cols]
        d__o = ref_data.getOutputTensorGrad(0)
        grad = np.zeros_like(data)
        np.add.at(grad, (slice(None), slice(None), rows[:, None], cols[None, :]), d__o * x_data)
        return [upsampled * x_data, grad, None]

    op_tester.setPatterns(["MulArgGradOp", "UpsampleToResize"], enableRuntimeAsserts=False)
    op_tester.run(init_builder, reference, "train", opsets={"ai.onnx": 9, "ai.graphcore": 1})


@pytest.mark.follows("test_upsample_grad")
@pytest.mark.parametrize(
    "data_shape, scales",
    [([2, 2], [2.0, 3.0]), ([2, 2], [2.5, 2.5]), ([3, 2], [2.5, 2.5]), ([5, 3], [2.3, 2.5])],
)
def test_upsample_grad(op_tester, data_shape, scales):
    _run(op_tester, data_shape, scales)
