"""How a compiled program's IPUs split into replicas, decided while it is built.

A program first assumes one IPU per replica; a pipeline or shards met while its Python
runs say how many IPUs a replica spans. When nothing has depended on the replica count
yet, the build goes on with fewer replicas (`replicated.require_ipus_per_replica`)
instead of starting again, so the Python runs once, as the original's compiler decides
the replication factor after one trace (poplar_compiler.cc: IPUs / IPUs per replica).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class ReplicaLayout:
    """The replicas of a program being built, over the `ipus` of its device."""

    replicas: int
    ipus: int

    @property
    def ipus_per_replica(self) -> int:
        return max(1, self.ipus // self.replicas)
