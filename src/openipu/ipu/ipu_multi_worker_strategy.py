"""`tensorflow.python.ipu.ipu_multi_worker_strategy` (deprecated: use PopDistStrategy)."""

from openipu._src.distributed.collective_extended import IPUMirroredVariable, IPUSyncOnReadVariable
from openipu._src.distributed.multi_worker_strategy import (
    IPUMultiWorkerExtended,
    IPUMultiWorkerStrategy,
    IPUMultiWorkerStrategyV1,
)

__all__ = [
    "IPUMirroredVariable",
    "IPUMultiWorkerExtended",
    "IPUMultiWorkerStrategy",
    "IPUMultiWorkerStrategyV1",
    "IPUSyncOnReadVariable",
]
