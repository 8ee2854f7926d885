"""`tensorflow.python.ipu.distributed.ipu_horovod_strategy` (on TensorFlow's collectives)."""

from openipu._src.distributed.horovod_strategy import IPUHorovodExtended, IPUHorovodStrategy

__all__ = ["IPUHorovodExtended", "IPUHorovodStrategy"]
