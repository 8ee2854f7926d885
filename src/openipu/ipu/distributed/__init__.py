"""`tensorflow.python.ipu.distributed`: collectives between instances and the PopDist strategies.

`allreduce`, `allgather` and `broadcast` combine one tensor per instance (the
processes `poprun` starts); `popdist_strategy` and `ipu_horovod_strategy`
hold the strategies.
"""

from openipu._src.distributed.host_collectives import (
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    allreduce,
    broadcast,
)
from openipu.ipu.distributed import ipu_horovod_strategy, popdist_strategy

__all__ = [
    "Adasum",
    "Average",
    "Max",
    "Min",
    "Product",
    "Sum",
    "allgather",
    "allreduce",
    "broadcast",
    "ipu_horovod_strategy",
    "popdist_strategy",
]
