"""TF1 (graph-mode) layers made for the IPU."""

from ipu_tensorflow_addons.v1 import layers

__all__ = ["layers"]
