"""`tensorflow.python.ipu.distributed.host_collective_ops`: collectives between instances, by tensor."""

from openipu._src.distributed.host_collective_ops import allgather, allreduce, broadcast

__all__ = ["allgather", "allreduce", "broadcast"]
