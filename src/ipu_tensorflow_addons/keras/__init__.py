"""Keras layers and optimizers for the IPU."""

from ipu_tensorflow_addons.keras import layers, optimizers

__all__ = ["layers", "optimizers"]
