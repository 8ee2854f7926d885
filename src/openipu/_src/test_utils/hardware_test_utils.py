"""Test decorators that depend on the IPUs a CI machine has
(tensorflow/python/ipu/test_utils/hardware_test_utils.py).

As in the original, the hardware IPUs are counted by the `TF_IPU_COUNT`
environment variable: emulated IPUs are the IPU Model's stand-in, so a test
that needs hardware IPUs is skipped unless that variable says they are there.
"""

from __future__ import annotations

import functools
import os

from openipu._src.config.enums import DeviceConnectionType


def get_ci_num_ipus() -> int:
    return int(os.getenv("TF_IPU_COUNT", "0"))


def has_ci_ipus() -> bool:
    return get_ci_num_ipus() > 0


def add_hw_ci_connection_options(opts) -> None:
    opts.device_connection.enable_remote_buffers = True
    opts.device_connection.type = DeviceConnectionType.ON_DEMAND


def test_may_use_ipus_or_model(num_ipus, func=None):
    """A test that runs on hardware IPUs or on the IPU Model (here: emulated IPUs)."""
    return test_uses_ipus(num_ipus=num_ipus, allow_ipu_model=True, func=func)


def test_uses_ipus(num_ipus, allow_ipu_model=False, func=None):
    """A test that needs `num_ipus` hardware IPUs (skipped without them unless
    `allow_ipu_model`)."""

    def decorator(f):
        @functools.wraps(f)
        def decorated(self, *args, **kwargs):
            available = get_ci_num_ipus()
            if available < num_ipus and not allow_ipu_model:
                self.skipTest(f"Requested {num_ipus} IPUs, but only {available} are available.")
            if available >= num_ipus:
                assert "use_ipu_model" not in os.getenv("TF_POPLAR_FLAGS", ""), (
                    "Do not set use_ipu_model when running HW tests."
                )
            return f(self, *args, **kwargs)

        return decorated

    return decorator(func) if func is not None else decorator


def skip_on_hw(func):
    """Skips the test when hardware IPUs are there."""

    @functools.wraps(func)
    def decorated(self, *args, **kwargs):
        if has_ci_ipus():
            self.skipTest("Skipping test on HW")
        return func(self, *args, **kwargs)

    return decorated


def skip_if_not_enough_ipus(self, num_ipus) -> None:
    available = get_ci_num_ipus()
    if available < num_ipus:
        self.skipTest(f"Requested {num_ipus} IPUs, but only {available} are available.")


def skip_with_asan(reason):
    """Skips the test under AddressSanitizer."""

    def decorator(f):
        @functools.wraps(f)
        def decorated(self, *args, **kwargs):
            if "ASAN_OPTIONS" in os.environ:
                self.skipTest(reason)
            return f(self, *args, **kwargs)

        return decorated

    return decorator
