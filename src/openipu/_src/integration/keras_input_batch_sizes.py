"""`tf_keras` `Functional._validate_graph_inputs_and_outputs`, wrapped: Inputs of
different static batch sizes make no model.

Why: the original's Keras (graphcore/keras keras/engine/functional.py, Keras 2.6)
refuses a functional model whose `keras.Input`s give different batch sizes, with
ValueError "The specified batch sizes of the Input Layers are incompatible" (its
keras/ipu/extensions/single_ipu/training_test.py checks it); tf_keras 2.21 only logs
a warning, and the model then fails later, if at all. Checked with tf_keras 2.21
(the validation runs from `Functional._init_graph_network`, after the inputs are
known to be Keras tensors; `training_utils.get_static_batch_size` reads an Input's
batch size).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from openipu._src.integration.patching import Kind, Patch, apply, register


def _refusing_different_batch_sizes(stock: Callable) -> Callable:
    @functools.wraps(stock)
    def validate(self) -> None:
        inputs = self.inputs
        # Inputs that are not Keras tensors are the stock validation's error.
        if all(hasattr(x, "_keras_history") for x in inputs):
            from tf_keras.src.engine import training_utils

            sizes = [training_utils.get_static_batch_size(x._keras_history.layer) for x in inputs]
            if len({size for size in sizes if size is not None}) > 1:
                raise ValueError(
                    "The specified batch sizes of the Input Layers are incompatible. "
                    f"Found batch sizes: {sizes}"
                )
        stock(self)

    return validate


VALIDATE_INPUTS = register(
    Patch(
        module="tf_keras.src.engine.functional",
        attribute="Functional._validate_graph_inputs_and_outputs",
        kind=Kind.METHOD,
        replacement=_refusing_different_batch_sizes,
        reason="Inputs of different static batch sizes are a ValueError, as in the original's "
        "Keras 2.6 (tf_keras logs a warning)",
        tf_keras=("2.21",),
    )
)


def install() -> None:
    """Applies the check for the life of the process (idempotent)."""
    apply(VALIDATE_INPUTS)
