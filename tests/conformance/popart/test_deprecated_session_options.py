"""graphcore/popart tests/integration/deprecated_session_options.py: the deprecated
prefetch-buffering options warn and set their new names (Cpu)."""

import pytest

import popart


@pytest.mark.follows("test_deprecated_prefetchBufferingDepthMap_option")
@pytest.mark.parametrize("tensor_map", [{}, {"some_tensor_id": 100}])
def test_deprecated_prefetchBufferingDepthMap_option(capfd, tensor_map):  # noqa: N802
    opts = popart.SessionOptions()
    opts.prefetchBufferingDepthMap = tensor_map
    assert opts.bufferingDepthMap == tensor_map
    assert "prefetchBufferingDepthMap has been deprecated" in capfd.readouterr().err


@pytest.mark.follows("test_deprecated_defaultPrefetchBufferingDepth_option")
@pytest.mark.parametrize("value", [111122, 100])
def test_deprecated_defaultPrefetchBufferingDepth_option(capfd, value):  # noqa: N802
    opts = popart.SessionOptions()
    opts.defaultPrefetchBufferingDepth = value
    assert opts.defaultBufferingDepth == value
    assert "defaultPrefetchBufferingDepth has been deprecated" in capfd.readouterr().err
