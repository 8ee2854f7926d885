"""Shared test fixtures.

`ipu_system` configures an emulated system (one single-IPU device unless the
test asks for more with `@pytest.mark.parametrize("ipu_system", [...], indirect=True)`)
and resets it afterwards. `strategy_on` is a function: `strategy_on(n)` configures a
device of n IPUs and returns an IPUStrategy on it; the system is reset after the test.
A system that a test configured where none was (as the original's tests do, in their
bodies) is reset after it, so the next test starts unconfigured, whatever order xdist runs
them in; a system a module-wide fixture configured is left to that fixture.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# As in an IPU program, the IPU module comes first: it splits the host CPU into one
# logical device per emulated IPU, which must happen before TensorFlow starts.
import gc  # noqa: E402

import pytest  # noqa: E402
import tensorflow.python.ipu  # noqa: E402, F401

# The imported modules live as long as the test process: moved out of the collector's
# generations, they are not traversed by every full collection again (each took 1.5-2.4 s
# late in a CI worker, together 44-107 s of its run).
gc.collect()
gc.freeze()


@pytest.fixture(autouse=True)
def _no_system_left_configured():
    from openipu._src.system import configure

    configured_before = configure.maybe_current_system() is not None
    yield
    if not configured_before and configure.maybe_current_system() is not None:
        configure.reset_ipu_configuration()


@pytest.fixture
def ipu_system(request):
    from openipu._src.config.ipu_config import IPUConfig
    from openipu._src.system import configure

    config = IPUConfig()
    config.auto_select_ipus = getattr(request, "param", 1)
    configure.configure_ipu_system(config)
    yield configure.current_system()
    configure.reset_ipu_configuration()


@pytest.fixture
def strategy_on():
    from tensorflow.python import ipu

    def configure(ipus: int):
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = ipus
        config.configure_ipu_system()
        return ipu.ipu_strategy.IPUStrategy()

    yield configure
    ipu.config.reset_ipu_configuration()


@pytest.fixture
def tf1_graph():
    """A fresh TF1-style graph (sessions, placeholders) for the duration of a test."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        yield graph
