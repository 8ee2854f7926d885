"""graphcore/popart tests/integration/available_memory_proportion_test.py: an available memory
proportion outside (0, 1] given to a convolution is refused with the original's message
(willow/src/builder.cpp). The original's other scenarios read PopLibs' DEBUG planning log
(the per-tile memory limit each op was planned with), which an emulation has not."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_conv_avail_memory_error")
@pytest.mark.parametrize("proportion", [1.1, 0.0, -0.5])
def test_conv_avail_memory_error(proportion):
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 4, 4]))
    w = builder.addInitializedInputTensor(np.ones([3, 2, 4, 4], np.float32))
    act = builder.aiOnnx.conv([x, w], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1])
    with pytest.raises(popart.popart_exception) as error:
        builder.setAvailableMemoryProportion(act, proportion)
    assert error.value.args[0].startswith("availableMemoryProportion must be in (0,1]")
    builder.setAvailableMemoryProportion(act, 1.0)  # the top of the range is allowed
    assert builder.getFloatNodeAttribute("__available_memory_proportion", {act}) == 1.0
