"""Models and devices for the session, data flow, device and option tests."""

from __future__ import annotations

import pytest
from small_model import SmallModel, build_small_model

import popart


@pytest.fixture
def small_model() -> SmallModel:
    return build_small_model()


@pytest.fixture
def ipu_model_device():
    return popart.DeviceManager().createIpuModelDevice({})
