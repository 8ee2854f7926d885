"""graphcore/popart tests/integration/model_loading_test.py: a corrupted ModelProto given to
the Builder fails with the original's message (Cpu)."""

import numpy as np
import pytest

import popart


@pytest.mark.follows("test_bad_model_proto")
def test_bad_model_proto():
    builder = popart.Builder()
    i = builder.addInputTensor("FLOAT", [4, 4])
    c = builder.aiOnnx.constant(np.random.rand(4, 4).astype(np.float32))
    m = builder.aiOnnx.matmul([builder.aiOnnx.matmul([i, c]), c])
    builder.addOutputTensor(m)
    proto = bytearray(builder.getModelProto())
    proto[::10] = bytes([10]) * len(proto[::10])
    with pytest.raises(popart.popart_exception) as e_info:
        popart.Builder(bytes(proto))
    message = e_info.value.args[0]
    assert message.startswith("Failed to load a ModelProto from the string ")
    assert message.endswith(
        "Check that it is either a valid path to an existing onnx model file, or is a valid "
        "onnx ModelProto string."
    )
