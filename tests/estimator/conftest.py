"""The estimator tests reset the IPU system the estimators configure."""

from __future__ import annotations

import pytest
from tensorflow.python import ipu


@pytest.fixture(autouse=True)
def _reset_ipu_system():
    yield
    ipu.config.reset_ipu_configuration()
