"""TF1 (graph-mode) layers and optimizers made for the IPU."""

from ipu_tensorflow_addons.v1 import layers, optimizers

__all__ = ["layers", "optimizers"]
