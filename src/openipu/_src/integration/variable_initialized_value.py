"""`Variable.initialized_value()` for TF1-style programs' variables.

Target: `tensorflow.python.ops.variables:Variable.initialized_value`, TensorFlow 2.21.

Why: IPU programs written for the original's TensorFlow (2.6) initialise one variable
from another's value with `other.initialized_value()` (e.g. the original's
tensorflow/python/ipu/tests/utils_test.py, testInitializerThatUsesIPUResourceDeviceChange).
TensorFlow 2.21 dropped the method's body: it raises NotImplementedError for every
variable. The replacement is TensorFlow 2.6's: the variable's value once initialised, its
initial value before, read outside any function being built.
"""

from __future__ import annotations

from typing import Any

from openipu._src.integration.patching import Kind, Patch, apply, register


def _initialized_value(stock: Any) -> Any:
    del stock  # its body only raises

    def initialized_value(self: Any) -> Any:
        from tensorflow.python.framework import ops
        from tensorflow.python.ops import cond, state_ops

        with ops.init_scope():
            return cond.cond(
                state_ops.is_variable_initialized(self),
                self.read_value,
                lambda: self.initial_value,
            )

    return initialized_value


INITIALIZED_VALUE = register(
    Patch(
        module="tensorflow.python.ops.variables",
        attribute="Variable.initialized_value",
        kind=Kind.METHOD,
        replacement=_initialized_value,
        reason="TF1 programs initialise a variable from another's `initialized_value()`, "
        "which TensorFlow 2.21 only refuses (NotImplementedError)",
        tensorflow=("2.21",),
    )
)


def install() -> None:
    apply(INITIALIZED_VALUE)
