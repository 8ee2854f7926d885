"""PopDist on emulated IPUs: what an instance started by `poprun` knows about the run.

Re-exports only; see `openipu._src.distributed.environment` for the variables.
"""

from openipu._src.distributed.popdist_api import (
    getDeviceId,
    getInstanceIndex,
    getNumInstances,
    getNumIpusPerReplica,
    getNumLocalReplicas,
    getNumTotalReplicas,
    getReplicaIndexOffset,
    init,
    isPopdistEnvSet,
)

__all__ = [
    "getDeviceId",
    "getInstanceIndex",
    "getNumInstances",
    "getNumIpusPerReplica",
    "getNumLocalReplicas",
    "getNumTotalReplicas",
    "getReplicaIndexOffset",
    "init",
    "isPopdistEnvSet",
]
