"""`tensorflow.python.ipu.distributed.popdist_strategy`: the strategy to use with `poprun`."""

from openipu._src.distributed.collective_extended import IPUMirroredVariable, IPUSyncOnReadVariable
from openipu._src.distributed.popdist_strategy import PopDistExtendedV1, PopDistStrategy

__all__ = ["IPUMirroredVariable", "IPUSyncOnReadVariable", "PopDistExtendedV1", "PopDistStrategy"]
