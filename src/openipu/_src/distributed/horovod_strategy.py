"""`IPUHorovodStrategy`: the multi-worker strategy over the instances `poprun` starts.

Graphcore's version took its cluster from Horovod; there is no Horovod here,
so the cluster is the one `poprun` describes (`TF_CONFIG`), and the
reductions are TensorFlow's collectives like every other strategy's.
"""

from __future__ import annotations

from openipu._src.distributed.multi_worker_strategy import (
    IPUMultiWorkerExtended,
    IPUMultiWorkerStrategyV1,
)


class IPUHorovodExtended(IPUMultiWorkerExtended):
    """Strategy internals of `IPUHorovodStrategy`."""

    # Every instance's replicas count, as under PopDist.
    _program_replicas_in_sync = True
    # The original builds it on an empty cluster (Horovod finds the processes), so TensorFlow
    # starts no health check and a deep copy is allowed
    # (tensorflow/python/ipu/horovod/ipu_horovod_strategy.py at 79fa5d2a01e^).
    _copy_refused_when_eager_with_cluster = False


class IPUHorovodStrategy(IPUMultiWorkerStrategyV1):
    """Replicas on the IPUs of every `poprun` instance, kept in sync by all-reduces."""

    _extended_class = IPUHorovodExtended

    def __init__(self, ipu_device: str = "/device:IPU:0", variables_on_host: bool = False) -> None:
        super().__init__(None, ipu_device=ipu_device, variables_on_host=variables_on_host)
