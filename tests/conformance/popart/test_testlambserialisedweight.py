"""graphcore/popart tests/integration/lambserialisedweight_tests/testlambserialisedweight.py:
training a MatMul by a weight whose MatMul is serialised over its output channels (2 or 4
splits), with LAMB (no bias correction), off-chip optimizer state, gradient accumulation and
the LambSerialisedWeight pattern, gives the same outputs and trained weights as without
the serialisation (the LAMB weight norms span the whole weight, not each split). The
original runs it on an IPU Model; here on one."""

import numpy as np
import pytest
from onnx import numpy_helper
from popart_tiedgather_checks import check_same_run, run_py

import popart


def _train(splits):
    np.random.seed(1984)
    input_data = np.random.rand(4, 20).astype(np.float32)
    weight_data = np.random.rand(20, 8).astype(np.float32)
    builder = popart.Builder()
    d0 = builder.addInputTensor(popart.TensorInfo("FLOAT", input_data.shape), "data0")
    w0 = builder.addInitializedInputTensor(weight_data, "weight0")
    x = builder.aiOnnx.matmul([d0, w0])
    if splits > 1:
        builder.setSerializeMatMul({x}, "output_channels", splits, True)
    loss = builder.aiGraphcore.l1loss([x], 0.1, debugContext="loss")
    options = {
        "enableOutlining": False,
        "enableGradientAccumulation": True,
        "accumulationFactor": 2,
        "optimizerStateTensorLocationSettings": popart.TensorLocationSettings(
            popart.TensorStorage.OffChip, 0
        ),
    }
    optimizer = popart.Adam(
        {
            "defaultLearningRate": (0.1, True),
            "defaultBeta1": (0.1, True),
            "defaultBeta2": (0.1, True),
        },
        mode=popart.AdamMode.LambNoBias,
    )
    patterns = popart.Patterns()
    patterns.enablePattern("LambSerialisedWeight", True)
    return run_py(
        builder.getModelProto(), {d0: input_data}, x, loss, optimizer, patterns, options
    ), (input_data, weight_data)


@pytest.mark.follows("test_lamb_serialised_pattern_correctness")
@pytest.mark.parametrize("splits", (2, 4))
def test_lamb_serialised_pattern_correctness(splits):
    whole, (input_data, weight_data) = _train(1)
    serialised, _ = _train(splits)
    check_same_run(whole, serialised)
    # Both micro batches run before the (accumulated) update: the plain product.
    np.testing.assert_allclose(whole[0].reshape(-1, 4, 8)[0], input_data @ weight_data, rtol=1e-5)
    # The step trained the weight.
    (trained,) = [w for w in whole[1].graph.initializer if w.name == "weight0"]
    assert not np.allclose(numpy_helper.to_array(trained), weight_data)
