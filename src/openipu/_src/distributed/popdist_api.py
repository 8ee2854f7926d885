"""The `popdist` package: what an instance started by `poprun` knows about the run.

The names are PopDist's (camelCase). Without `poprun` they describe a run of
one instance with one replica, so a program runs alike with and without it.
Importing `popdist` does not import TensorFlow.
"""

from __future__ import annotations

from openipu._src.distributed import environment
from openipu._src.system import topology


def init() -> None:
    """Checks the PopDist environment and joins the other instances' collectives.

    Strategies and host collectives join on their own when first used; calling
    `init` first reports a broken environment before any other work.
    """
    placement = environment.current_placement()
    if placement.num_instances > 1:
        from openipu._src.distributed import cluster_runtime  # TensorFlow, only when needed

        cluster_runtime.start()


def isPopdistEnvSet() -> bool:  # noqa: N802 - PopDist's name
    """Whether this process was started by `poprun` (the PopDist variables are set)."""
    return environment.is_set()


def getNumInstances() -> int:  # noqa: N802
    return environment.current_placement().num_instances


def getInstanceIndex() -> int:  # noqa: N802
    return environment.current_placement().instance_index


def getNumTotalReplicas() -> int:  # noqa: N802
    return environment.current_placement().num_total_replicas


def getNumLocalReplicas() -> int:  # noqa: N802
    return environment.current_placement().num_local_replicas


def getReplicaIndexOffset() -> int:  # noqa: N802
    """The global index of this instance's first replica."""
    return environment.current_placement().replica_index_offset


def getNumIpusPerReplica() -> int:  # noqa: N802
    return environment.current_placement().num_ipus_per_replica


def getDeviceId(numIpus: int | None = None) -> int:  # noqa: N802, N803 - PopDist's names
    """The id (as listed by `gc-info -l`) of the device holding this instance's IPUs.

    `numIpus` defaults to the local replicas times the IPUs per replica. Each
    instance's emulated machine holds exactly its own IPUs, so this is its first
    device of that size.
    """
    placement = environment.current_placement()
    wanted = placement.num_local_ipus if numIpus is None else numIpus
    if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
        raise ValueError(f"getDeviceId: numIpus must be a positive int, got {numIpus!r}")
    total = topology.num_emulated_ipus()
    for entry in topology.device_listing(total):
        if entry.num_ipus == wanted:
            return entry.device_id
    reason = (
        "a device must have a power-of-two number of IPUs"
        if not topology.is_power_of_two(wanted)
        else f"this instance's emulated machine has {total} IPU(s) ({topology.NUM_IPUS_ENV}; "
        "poprun sets it to the local replicas times --ipus-per-replica)"
    )
    raise ValueError(f"getDeviceId: no device of {wanted} IPU(s): {reason}")
