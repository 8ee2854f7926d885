"""`tf_keras` `input_spec.assert_input_compatibility`, wrapped: its errors name the
layer as the original's Keras did.

Why: tf_keras quotes the layer's name (`Layer "model" expects 2 input(s)`, `Input 0
of layer "dense" is incompatible`), where the original's Keras 2.6 (graphcore/keras
keras/engine/input_spec.py) wrote it bare (`Layer model expects ...`), and programs
and tests match on that text (keras/ipu/extensions/extensions_test.py matches
`Layer \\w+ expects 2 input\\(s\\)`). The rest of each message is tf_keras'. Checked
with tf_keras 2.21 (every Keras layer call reaches the module-level function through
`input_spec.assert_input_compatibility`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, register

_QUOTED_NAME = re.compile(r'^(Layer |Input \d+ of layer )"([^"]*)"')


def _with_bare_layer_names(stock: Callable) -> Callable:
    @functools.wraps(stock)
    def assert_input_compatibility(input_spec, inputs, layer_name):
        try:
            return stock(input_spec, inputs, layer_name)
        except ValueError as error:
            message = str(error)
            bare = _QUOTED_NAME.sub(r"\1\2", message, count=1)
            if bare == message:
                raise
            raise ValueError(bare).with_traceback(error.__traceback__) from None

    return assert_input_compatibility


ASSERT_INPUT_COMPATIBILITY = register(
    Patch(
        module="tf_keras.src.engine.input_spec",
        attribute="assert_input_compatibility",
        kind=Kind.FUNCTION,
        replacement=_with_bare_layer_names,
        reason="input errors name the layer unquoted, as the original's Keras 2.6 did",
        tf_keras=("2.21",),
    )
)


def install() -> None:
    """Applies the wording for the life of the process (idempotent)."""
    apply(ASSERT_INPUT_COMPATIBILITY)
