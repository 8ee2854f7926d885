"""Conformance suite for graphcore/keras `keras/ipu/` (manifest: `originals.txt` here).

The `follows` mark is registered by the parent folder's conftest. `ipu_scope` is the
setUp of the `single_ipu/` files: a one-IPU system, the IPUStrategy's scope entered.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def ipu_scope():
    """A one-IPU system configured as the originals' `setUp`, the IPUStrategy's scope entered."""
    from tensorflow.python import ipu

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.ipu_model.compile_ipu_code = False
    config.ipu_model.tiles_per_ipu = 1
    config.configure_ipu_system()
    strategy = ipu.ipu_strategy.IPUStrategyV1()
    with strategy.scope():
        yield strategy
    ipu.config.reset_ipu_configuration()
