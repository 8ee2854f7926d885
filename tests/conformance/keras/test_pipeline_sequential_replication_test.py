"""Conformance: graphcore/keras `keras/ipu/pipeline_sequential_replication_test.py`.

A Sequential model pipelined over 2 stages (`set_pipeline_stage_assignment` after
compile), replicated twice on 4 IPUs, predicts every sample of numpy data.
"""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras


@pytest.mark.follows("testPredictWithNumpyDataBs2Replicas2")
def test_predict_with_numpy_data_bs2_replicas2(strategy_on):
    strategy = strategy_on(4)
    with strategy.scope():
        init = keras.initializers.Constant(0.1)
        model = keras.Sequential(
            [
                keras.layers.Dense(4, name="layer0", kernel_initializer=init),
                keras.layers.Dense(2, name="layer1", kernel_initializer=init),
            ]
        )
        model.compile(steps_per_execution=12)
        model.set_pipeline_stage_assignment([0, 1])
        result = model.predict(np.full([96, 32], 1.0, np.single), batch_size=2, verbose=0)
    assert type(result) is np.ndarray
    np.testing.assert_allclose(result, np.full((96, 2), 32 * 0.1 * 0.1 * 4), rtol=1e-6)
