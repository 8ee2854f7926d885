"""`tensorflow.python.ipu.gradient_accumulation`: how accumulated gradients are reduced.

`Enum` is the standard library's, which the original module re-exported.
"""

from enum import Enum

from openipu._src.engine.gradient_accumulation import GradientAccumulationReductionMethod

__all__ = ["Enum", "GradientAccumulationReductionMethod"]
