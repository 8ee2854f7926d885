"""graphcore/popart tests/integration/addbias.py: two biased convolutions sharing a filter
give the same result with and without outlining; here also the convolution's values (Cpu)."""

import numpy as np
import pytest
from popart_session_helpers import infer
from scipy.signal import correlate

import popart


def _conv_reference(x, w, b):
    """A same-padded 3x3 convolution of NCHW `x` by OIHW `w`, plus bias."""
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.stack(
        [sum(correlate(padded[0, c], w[o, c], mode="valid") for c in range(x.shape[1])) + b[o]
         for o in range(w.shape[0])]
    )  # fmt: skip
    return out[None].astype(np.float32)


@pytest.mark.follows("test_basic")
def test_basic():
    biases = [np.random.rand(2).astype(np.float32) for _ in range(2)]
    filt = np.random.rand(2, 2, 3, 3).astype(np.float32)
    data = np.random.rand(1, 2, 4, 4).astype(np.float32)
    results = []
    for outlining in (False, True):
        builder = popart.Builder()
        i1 = builder.addInputTensor("FLOAT", [1, 2, 4, 4], "data")
        i2 = builder.addInitializedInputTensor(filt, "filter")
        window = {"dilations": [1, 1], "pads": [1, 1, 1, 1], "strides": [1, 1]}
        c1 = builder.aiOnnx.conv([i1, i2, builder.addInitializedInputTensor(biases[0])], **window)
        o = builder.aiOnnx.conv([c1, i2, builder.addInitializedInputTensor(biases[1])], **window)
        builder.addOutputTensor(o)
        opts = popart.SessionOptions()
        opts.enableOutlining = outlining
        opts.enableOutliningCopyCostPruning = False
        results.append(infer(builder.getModelProto(), [c1, o], {i1: data}, opts)[o])
    np.testing.assert_array_equal(results[0], results[1])
    expected = _conv_reference(_conv_reference(data, filt, biases[0]), filt, biases[1])
    np.testing.assert_allclose(results[0], expected, rtol=1e-5)
