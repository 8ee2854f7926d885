"""graphcore/popart tests/integration/optimizer_tests/sgd_mixed_mode_test_py_1.py: SGD trains the
same whichever of its values are const or non-const, for float32 and float16 models, with
separate or combined accumulator and momentum (and float16 or float32 accumulators), and with
weight-specific values and a learning rate replaced during training, with and without
Nesterov momentum (Cpu)."""

import numpy as np
import pytest
from popart_mixed_mode_checks import check_same_training, one_non_const_each, specific_mixes

import popart

TYPES = [popart.DataType.FLOAT, popart.DataType.FLOAT16]


# The original runs all four accumulator type pairs with separate accumulator and momentum;
# here two of them (the float32 pair runs with combined ones), to keep the suite fast.
@pytest.mark.slow
@pytest.mark.follows("test_sgd_mixed_mode_0")
@pytest.mark.parametrize(
    "mode, accum_type, accl1_type",
    [
        (popart.SGDAccumulatorAndMomentum.Combined, TYPES[0], TYPES[0]),
        (popart.SGDAccumulatorAndMomentum.Separate, TYPES[1], TYPES[1]),
        (popart.SGDAccumulatorAndMomentum.Separate, TYPES[0], TYPES[1]),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sgd_mixed_mode_0(tmp_path, mode, accum_type, accl1_type, dtype):
    values = {
        "defaultLearningRate": 1e-4,
        "defaultMomentum": 0.7,
        "defaultVelocityScaling": 1.0,
        "defaultWeightDecay": 0.1,
        "defaultDampening": 0.05,
        "lossScaling": 10.0,
    }

    def make(settings):
        return popart.SGD(
            settings, accumulatorAndMomentum=mode, accumType=accum_type, accl1Type=accl1_type
        )

    check_same_training(one_non_const_each(make, values), tmp_path, dtype, rtol=1e-2, atol=1e-3)


@pytest.mark.slow
@pytest.mark.follows("test_sgd_mixed_mode_1")
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sgd_mixed_mode_1(tmp_path, nesterov, dtype):
    defaults = {
        "defaultMomentum": 0.7,
        "defaultVelocityScaling": 0.8,
        "defaultWeightDecay": 0.1,
        "defaultDampening": 0.0 if nesterov else 0.05,
        "lossScaling": 10.0,
    }
    maps = specific_mixes(
        popart.SGD,
        (2e-4, 1e-4),
        defaults,
        {"momentum": 0.9, "velocityScaling": 0.25},
        fixed={"nesterov": (nesterov, True)},
    )
    check_same_training(maps, tmp_path, dtype, rtol=1e-2, atol=1e-3)
