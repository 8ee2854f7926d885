"""Conformance: graphcore/keras `keras/ipu/optimizers/optimizer_serialization_test.py`.

The IPU Keras optimizers (ALSOptimizer and its Adam/RMSProp/SGD variants, the ALS and
plain gradient accumulation optimizers): configs round-trip through `from_config`,
`weights` is a read-only property readable and settable through `set_weights`, equal to
`variables()`, and weights copy from one optimizer to another. The original names the
accumulation options' "off" state through Poplar's `threestate_pb2`, which is not
shipped here; its name, "THREESTATE_OFF", is given directly.
"""

from __future__ import annotations

import pytest
import tf_keras as keras
from tf_keras.ipu.optimizers import (
    ALSGradientAccumulationOptimizer,
    ALSOptimizer,
    ALSOptimizerAdam,
    ALSOptimizerRMSProp,
    ALSOptimizerSGD,
    GradientAccumulationOptimizer,
)

OFF = "THREESTATE_OFF"


def _sgd():
    return keras.optimizers.legacy.SGD(0.01)


OPTIMIZERS = {
    "ALSOptimizer": lambda: ALSOptimizer(_sgd()),
    "ALSOptimizerAdam": ALSOptimizerAdam,
    "ALSOptimizerRMSProp": ALSOptimizerRMSProp,
    "ALSOptimizerSGD": ALSOptimizerSGD,
    "ALSGradientAccumulationOptimizer": lambda: ALSGradientAccumulationOptimizer(
        ALSOptimizer(_sgd()),
        num_mini_batches=2,
        offload_weight_update_variables=OFF,
        replicated_optimizer_state_sharding=OFF,
    ),
    "GradientAccumulationOptimizer": lambda: GradientAccumulationOptimizer(
        _sgd(),
        num_mini_batches=2,
        offload_weight_update_variables=OFF,
        replicated_optimizer_state_sharding=OFF,
    ),
}
CASES = pytest.mark.parametrize("make", list(OPTIMIZERS.values()), ids=list(OPTIMIZERS))


@pytest.mark.follows("testCreateFromConfig")
@CASES
def test_create_from_config(make):
    first = make()
    config = dict(first.get_config())
    config["name"] += "_copy"
    second = type(first).from_config(config)
    assert second.get_config() == config


@pytest.mark.follows("testWeightsPropertyRead")
@CASES
def test_weights_property_read(make):
    optimizer = make()
    weights = optimizer.weights
    optimizer.set_weights(2 * weights)
    assert optimizer.weights == 2 * weights


@pytest.mark.follows("testWeightsPropertyWrite")
@CASES
def test_weights_property_write(make):
    optimizer = make()
    # Python 3.11 words it "... has no setter" where the original's Python said "can't set".
    with pytest.raises(AttributeError, match="can't set attribute|has no setter"):
        optimizer.weights = 1


@pytest.mark.follows("testVariablesMethod")
@CASES
def test_variables_method(make):
    optimizer = make()
    assert optimizer.get_weights() == optimizer.variables()


@pytest.mark.follows("testGetSetWeights")
@CASES
def test_get_set_weights(make):
    first, second = make(), make()
    second.set_weights([w * 2 for w in first.get_weights()])
    for a, b in zip(first.get_weights(), second.get_weights(), strict=True):
        assert b == 2 * a
