"""Keras optimizers made for the IPU."""

from openipu._src.addons.keras.optimizers.adam import AdamIpuOptimizer
from openipu._src.addons.keras.optimizers.lamb import LAMBIpuOptimizer
from openipu._src.addons.keras.optimizers.sgd import SGDIpuOptimizer

__all__ = ["AdamIpuOptimizer", "LAMBIpuOptimizer", "SGDIpuOptimizer"]
