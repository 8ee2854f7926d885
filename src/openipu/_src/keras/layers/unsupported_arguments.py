"""Keras arguments the IPU layers take for API consistency but cannot act on."""

from __future__ import annotations


def refuse_unsupported(layer: object, arguments: dict[str, object]) -> None:
    """A NotImplementedError for the first of `arguments` given a (truthy) value, in the
    original's words (ipu_tensorflow_addons/keras/layers/ipu_layer.py `_check_unsupported`)."""
    name = type(layer).__name__
    for argument, value in arguments.items():
        if value:
            raise NotImplementedError(
                f"ipu_tensorflow_addons.keras.layers.{name} does not support __init__ argument "
                f"{argument}. It is included for API consistencywith keras.{name}."
            )
