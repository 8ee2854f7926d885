"""Conformance: graphcore/keras `keras/ipu/poprun_popdist_strategy_test.py`.

The original runs under poprun as 2 instances of 1 replica each (`poprun_py_test`): a
Keras model made in PopDistStrategy's scope, with and without asynchronous callbacks,
fits, evaluates and predicts on each instance's shard of a dataset. Here openipu's
poprun starts `poprun_popdist_strategy_program.py` as 2 instances, which also checks
the predictions' shape and that training moved the weights alike on both instances.
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).resolve().parent
PROGRAM = HERE / "poprun_popdist_strategy_program.py"


def _poprun_scenarios():
    spec = importlib.util.spec_from_file_location(
        "poprun_scenarios", HERE.parent / "poprun_scenarios.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


poprun_scenarios = _poprun_scenarios()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return poprun_scenarios.run(PROGRAM, tmp_path_factory.mktemp("keras_popdist"))


@pytest.mark.follows("test_single_multi_replica_training_step_keras")
def test_single_multi_replica_training_step_keras(outcomes):
    poprun_scenarios.assert_passed(outcomes, "test_single_multi_replica_training_step_keras")
