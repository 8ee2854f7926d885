"""graphcore/popart tests/integration/subgraph_tests/verify_subgraphs_test.py: a MatMul made
in a Call'd subgraph has the shape of the same MatMul in the main graph, and a MatMul and a
Conv after the Call build (Cpu)."""

import numpy as np
import pytest

import popart

BATCH, IN_CHANNELS, OUT_CHANNELS, TIME = 1, 80, 128, 10


def _call_output_shape(use_subgraph):
    builder = popart.Builder()
    x_info = popart.TensorInfo("FLOAT", [BATCH, IN_CHANNELS, TIME])
    w_info = popart.TensorInfo("FLOAT", [OUT_CHANNELS, IN_CHANNELS])
    if use_subgraph:
        sub = builder.createSubgraphBuilder()
        sx = sub.addInputTensor(x_info)
        sw = sub.addInputTensor(w_info)
        sub.addOutputTensor(sub.aiOnnx.matmul([sw, sx]))
    x = builder.addInputTensor(x_info)
    w1 = builder.addInputTensor(w_info)
    if use_subgraph:
        o1 = builder.aiGraphcore.call([x, w1], 1, callee=sub)[0]
    else:
        o1 = builder.aiOnnx.matmul([w1, x])
    w2 = builder.addInitializedInputTensor(np.zeros((OUT_CHANNELS, OUT_CHANNELS), np.float32))
    o2 = builder.aiOnnx.unsqueeze([builder.aiOnnx.matmul([w2, o1])], axes=[3])
    conv_weights = builder.aiOnnx.constant(
        np.zeros([OUT_CHANNELS, OUT_CHANNELS, 3, 1]).astype(np.float32)
    )
    conv_out = builder.aiOnnx.conv(
        [o2, conv_weights], dilations=[1, 1], kernel_shape=[3, 1], strides=[1, 1], pads=[1, 0, 1, 0]
    )
    conv_out = builder.aiOnnx.squeeze([conv_out], axes=[3])
    assert builder.getTensorShape(conv_out) == [BATCH, OUT_CHANNELS, TIME]
    return builder.getTensorShape(o1)


@pytest.mark.follows("test_subgraph_conv")
def test_subgraph_conv():
    # numpy's shape of the MatMul: w [128, 80] @ x [1, 80, 10] broadcasts to [1, 128, 10].
    expected = np.matmul(
        np.zeros((OUT_CHANNELS, IN_CHANNELS)), np.zeros((BATCH, IN_CHANNELS, TIME))
    )
    without_subgraph = _call_output_shape(use_subgraph=False)
    with_subgraph = _call_output_shape(use_subgraph=True)
    assert without_subgraph == with_subgraph == list(expected.shape)
