"""`tensorflow.python.ipu.ipu_strategy`: the distribution strategy for IPUs."""

from openipu._src.strategy.ipu_strategy import IPUExtended, IPUStrategy, IPUStrategyV1

__all__ = ["IPUExtended", "IPUStrategy", "IPUStrategyV1"]
