"""graphcore/popart tests/integration/contiguous_memory_test.py: reading weights into a numpy
array that is not C-contiguous is refused with an error saying so, and a C-contiguous array
receives them (IpuModel2)."""

import numpy as np
import pytest
from popart_session_helpers import ipu_model_device

import popart


@pytest.mark.follows("test_passing_non_contiguous_to_py_weights_io_should_raise_exception")
def test_passing_non_contiguous_to_py_weights_io_should_raise_exception():
    w_init = np.arange(6, dtype=np.float32).reshape(2, 3).transpose(1, 0)
    assert not w_init.flags.c_contiguous
    builder = popart.Builder()
    w = builder.addInitializedInputTensor(w_init, "W")
    loss = builder.aiOnnx.reducesumsquare([w])
    options = popart.SessionOptions()
    options.constantWeights = False
    session = popart.InferenceSession(
        fnModel=builder.getModelProto(),
        deviceInfo=ipu_model_device(),
        dataFlow=popart.DataFlow(1, {loss: popart.AnchorReturnType("ALL")}),
        userOptions=options,
    )
    session.prepareDevice()
    session.weightsFromHost()
    session.weightsToHost()
    w_out = np.zeros_like(w_init)
    assert not w_out.flags.c_contiguous
    with pytest.raises(popart.popart_exception) as e_info:
        session.readWeights(popart.PyWeightsIO({w: w_out}))
    assert "it is not c-contiguous" in str(e_info.value)
    # The original's suggested fix: a C-ordered array.
    w_out = np.zeros_like(w_init, order="C")
    session.readWeights(popart.PyWeightsIO({w: w_out}))
    np.testing.assert_equal(w_out, w_init)
