"""graphcore/popart tests/integration/convolution_options_test.py: an available memory
proportion of 1.1 on a convolution is refused with the original's message. The original's
other scenarios read PopLibs' DEBUG planning log, which an emulation has not."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_conv_avail_memory_error")
def test_conv_avail_memory_error():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 4, 4]))
    w = builder.addInitializedInputTensor(np.ones([3, 2, 3, 3], np.float32))
    act = builder.aiOnnx.conv([x, w], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1])
    builder.aiOnnx.relu([act])
    with pytest.raises(popart.popart_exception) as error:
        builder.setAvailableMemoryProportion(act, 1.1)
    assert error.value.args[0].startswith("availableMemoryProportion must be in (0,1]")
