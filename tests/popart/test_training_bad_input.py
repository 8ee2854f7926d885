"""Bad input to training sessions: documented errors (or warnings) that name the tensor,
option or value (the loss, accumulation factor and anchor errors are in
test_training_session.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from training_helpers import build_regression, regression_data, train_session

import popart


def session_for(model, optimizer=None, options=None, proto=None):
    return popart.TrainingSession(
        proto or model.proto,
        popart.DataFlow(2, {}),
        model.loss,
        optimizer or popart.SGD({"defaultLearningRate": (0.1, False)}),
        popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
        userOptions=options,
    )


def test_gradients_of_several_micro_batches_must_be_reduced():
    model = build_regression()
    options = popart.SessionOptions()
    options.enableGradientAccumulation = True
    options.accumulationFactor = 2
    options.accumulationAndReplicationReductionType = popart.ReductionType.NoReduction
    with pytest.raises(
        popart.popart_exception, match="accumulationAndReplicationReductionType is NoReduction"
    ):
        session_for(model, options=options)
    options.accumulationAndReplicationReductionType = popart.ReductionType.Mean
    session_for(model, options=options)


def test_specific_values_for_a_tensor_that_is_not_trained_are_named(caplog):
    model = build_regression()
    optimizer = popart.SGD({"defaultLearningRate": (0.1, False)})
    optimizer.insertSpecific("wieght", {"learningRate": (0.5, False)})
    optimizer.insertSpecific(model.w, {"learningRate": (0.5, False)})
    with caplog.at_level(logging.WARNING, logger="popart.session"):
        session_for(model, optimizer)
    messages = [record.getMessage() for record in caplog.records]
    assert any("'wieght', which is not a weight" in message for message in messages)
    assert not any(f"'{model.w}'" in message.split(",")[0] for message in messages)


def test_weights_of_the_wrong_shape_or_type_name_the_weight():
    model = build_regression()
    session = session_for(model)
    session.prepareDevice()
    session.weightsFromHost()
    # willow/src/tensor.cpp verifyMutableVoidInfo: the shape first, then the byte count
    # (tensordata.cpp resetData).
    with pytest.raises(
        popart.popart_internal_exception, match="does not not match the expected write region"
    ):
        session.writeWeights(popart.PyWeightsIO({model.w: np.zeros((2, 2), np.float32)}))
    with pytest.raises(popart.popart_exception, match="data of non-matching size"):
        session.writeWeights(popart.PyWeightsIO({model.b: np.zeros(2, np.int16)}))
    with pytest.raises(TypeError, match="updateOptimizerFromHost optimizer"):
        session.updateOptimizerFromHost({"defaultLearningRate": (0.1, False)})


def test_a_checkpoint_whose_optimizer_state_does_not_fit_names_the_tensor(tmp_path):
    model = build_regression(onnx_loss=True)
    x, t = regression_data(2)
    adam, _, _ = train_session(model, popart.Adam({"defaultLearningRate": (0.01, False)}), x, t, 2)
    path = str(tmp_path / "adam.onnx")
    adam.modelToHost(path)
    # The same optimizer with float16 state cannot take the file's float32 state.
    half_state = popart.Adam(
        {"defaultLearningRate": (0.01, False)},
        accl1_type=popart.DataType.FLOAT16,
        accl2_type=popart.DataType.FLOAT16,
    )
    with pytest.raises(
        popart.popart_exception, match=r"initializer 'Accl1___w' \(float32 \[3, 2\]\)"
    ):
        session_for(model, half_state, proto=path)
