"""Conformance: graphcore/keras `keras/ipu/pipeline_model_replication_test.py`.

A functional model pipelined over 2 stages (`PipelineStage`), replicated twice on 4
IPUs, predicts every sample of numpy data without pipelining options (prediction needs
no gradient accumulation).
"""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras


@pytest.mark.follows("testPredictWithNumpyDataBs2Replicas2")
def test_predict_with_numpy_data_bs2_replicas2(strategy_on):
    strategy = strategy_on(4)
    with strategy.scope():
        inputs = keras.layers.Input(shape=(32), dtype=np.single, batch_size=2)
        init = keras.initializers.Constant(0.1)
        with keras.ipu.PipelineStage(0):
            x = keras.layers.Dense(4, name="layer0", kernel_initializer=init)(inputs)
        with keras.ipu.PipelineStage(1):
            x = keras.layers.Dense(2, name="layer1", kernel_initializer=init)(x)
        model = keras.Model(inputs, x)
        model.compile(steps_per_execution=12)
        result = model.predict(np.full([96, 32], 1.0, np.single), batch_size=2, verbose=0)
    assert type(result) is np.ndarray
    np.testing.assert_allclose(result, np.full((96, 2), 32 * 0.1 * 0.1 * 4), rtol=1e-6)
