"""graphcore/popart tests/integration/operators_test/copy_var_update_test.py: a CopyVarUpdate
that copies counter + 1 into a weight of a training model (beside a convolution it trains)
makes the counter count the runs (Cpu)."""

import numpy as np
import pytest

import popart
from conftest import create_test_device


@pytest.mark.follows("test_training_with_var_update")
def test_training_with_var_update():
    builder = popart.Builder()
    info = popart.TensorInfo("FLOAT", [1, 2, 4, 4])
    data = builder.addInputTensor(info)
    weights = builder.addInitializedInputTensor(np.ones([3, 2, 3, 3], np.float32))
    act = builder.aiOnnx.conv([data, weights], dilations=[1, 1], pads=[1, 1, 1, 1], strides=[1, 1])
    out = builder.aiOnnx.relu([act])
    loss = builder.aiGraphcore.l1loss([out], 0.1)
    counter = builder.addInitializedInputTensor(np.zeros([1], np.float32))
    one = builder.aiOnnx.constant(np.asarray([1], dtype=np.float32))
    counter_added = builder.aiOnnx.add([counter, one])
    copied = builder.aiGraphcore.copyvarupdate([counter, counter_added])
    options = popart.SessionOptions()
    options.constantWeights = False
    session = popart.TrainingSession(
        fnModel=builder.getModelProto(),
        dataFlow=popart.DataFlow(
            1, {name: popart.AnchorReturnType("All") for name in (out, counter_added, copied)}
        ),
        loss=loss,
        optimizer=popart.ConstSGD(0.01),
        userOptions=options,
        deviceInfo=create_test_device(),
    )
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    inputs = {data: np.ones(info.shape(), np.float32)}
    for run in range(4):
        session.run(popart.PyStepIO(inputs, anchors))
        assert anchors[counter_added][0] == run + 1
        # The copy's output is the updated counter.
        np.testing.assert_array_equal(anchors[copied], [run + 1])
