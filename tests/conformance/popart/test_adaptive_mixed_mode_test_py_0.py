"""graphcore/popart tests/integration/optimizer_tests/adaptive_mixed_mode_test_py_0.py: Adaptive
(centered RMSProp, and the default RMSProp with weight-specific values and a learning rate
replaced during training) trains the same whichever of its values are const or non-const,
for float32 and float16 models (Cpu)."""

import numpy as np
import pytest
from popart_mixed_mode_checks import check_same_training, one_non_const_each, specific_mixes

import popart


@pytest.mark.slow
@pytest.mark.follows("test_adaptive_mixed_mode_0")
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_adaptive_mixed_mode_0(tmp_path, dtype):
    values = {
        "defaultLearningRate": 0.005,
        "defaultAlpha": 0.8,
        "defaultMomentum": 0.5,
        "defaultWeightDecay": 0.1,
        "defaultEps": 1e-6,
        "lossScaling": 10.0,
    }

    def make(settings):
        return popart.Adaptive(settings, mode=popart.AdaptiveMode.CenteredRMSProp)

    check_same_training(one_non_const_each(make, values), tmp_path, dtype)


@pytest.mark.slow
@pytest.mark.follows("test_adaptive_mixed_mode_1")
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_adaptive_mixed_mode_1(tmp_path, dtype):
    defaults = {
        "defaultAlpha": 0.7,
        "defaultMomentum": 0.8,
        "defaultWeightDecay": 0.1,
        "defaultEps": 1e-6,
        "lossScaling": 10.0,
    }
    maps = specific_mixes(
        popart.Adaptive, (0.005, 0.0025), defaults, {"alpha": 0.7, "momentum": 0.8}
    )
    check_same_training(maps, tmp_path, dtype)
