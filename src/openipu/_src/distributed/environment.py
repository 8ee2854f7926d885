"""The environment `poprun` gives each instance, and what it means.

An instance learns its place in the run from these variables (the names are
those of Graphcore's PopDist):

- `POPDIST_NUM_INSTANCES`: instances (processes) in the run;
- `POPDIST_INSTANCE_INDEX`: this instance, from 0;
- `POPDIST_NUM_TOTAL_REPLICAS`: replicas of the whole run;
- `POPDIST_NUM_LOCAL_REPLICAS`: replicas this instance runs;
- `POPDIST_REPLICA_INDEX_OFFSET`: global index of this instance's first replica;
- `POPDIST_NUM_IPUS_PER_REPLICA`: IPUs one replica uses.

`TF_CONFIG` describes the cluster (one `worker` task per instance) for
TensorFlow's collectives, and `OPENIPU_NUM_IPUS` sizes each instance's
emulated machine: its local replicas times the IPUs per replica.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping

NUM_INSTANCES = "POPDIST_NUM_INSTANCES"
INSTANCE_INDEX = "POPDIST_INSTANCE_INDEX"
NUM_TOTAL_REPLICAS = "POPDIST_NUM_TOTAL_REPLICAS"
NUM_LOCAL_REPLICAS = "POPDIST_NUM_LOCAL_REPLICAS"
REPLICA_INDEX_OFFSET = "POPDIST_REPLICA_INDEX_OFFSET"
NUM_IPUS_PER_REPLICA = "POPDIST_NUM_IPUS_PER_REPLICA"
TF_CONFIG = "TF_CONFIG"

POPDIST_VARIABLES = (
    NUM_INSTANCES,
    INSTANCE_INDEX,
    NUM_TOTAL_REPLICAS,
    NUM_LOCAL_REPLICAS,
    REPLICA_INDEX_OFFSET,
    NUM_IPUS_PER_REPLICA,
)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one instance sits in a run: its index, its replicas and their IPUs."""

    num_instances: int = 1
    instance_index: int = 0
    num_total_replicas: int = 1
    num_ipus_per_replica: int = 1

    def __post_init__(self) -> None:
        for name in ("num_instances", "num_total_replicas", "num_ipus_per_replica"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if not 0 <= self.instance_index < self.num_instances:
            raise ValueError(
                f"instance index {self.instance_index} is not in [0, {self.num_instances}): "
                f"the run has {self.num_instances} instance(s)"
            )
        if self.num_total_replicas % self.num_instances:
            raise ValueError(
                f"{self.num_total_replicas} replica(s) cannot be split evenly over "
                f"{self.num_instances} instances: the replica count must be a multiple of the "
                "instance count"
            )

    @property
    def num_local_replicas(self) -> int:
        return self.num_total_replicas // self.num_instances

    @property
    def replica_index_offset(self) -> int:
        return self.instance_index * self.num_local_replicas

    @property
    def num_local_ipus(self) -> int:
        return self.num_local_replicas * self.num_ipus_per_replica

    def as_environment(self) -> dict[str, str]:
        """The PopDist variables of this placement."""
        return {
            NUM_INSTANCES: str(self.num_instances),
            INSTANCE_INDEX: str(self.instance_index),
            NUM_TOTAL_REPLICAS: str(self.num_total_replicas),
            NUM_LOCAL_REPLICAS: str(self.num_local_replicas),
            REPLICA_INDEX_OFFSET: str(self.replica_index_offset),
            NUM_IPUS_PER_REPLICA: str(self.num_ipus_per_replica),
        }


def is_set(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the PopDist variables are present (the program runs under `poprun`)."""
    environ = os.environ if environ is None else environ
    return NUM_TOTAL_REPLICAS in environ and NUM_INSTANCES in environ


def current_placement(environ: Mapping[str, str] | None = None) -> Placement:
    """This instance's placement, read from the environment (one instance without poprun)."""
    environ = os.environ if environ is None else environ
    if not is_set(environ):
        return Placement()
    placement = Placement(
        num_instances=_positive_int(environ, NUM_INSTANCES, 1),
        instance_index=_int(environ, INSTANCE_INDEX, 0),
        num_total_replicas=_positive_int(environ, NUM_TOTAL_REPLICAS, 1),
        num_ipus_per_replica=_positive_int(environ, NUM_IPUS_PER_REPLICA, 1),
    )
    # The derived values are set too; if a user edited them, they must still agree.
    for name, expected in (
        (NUM_LOCAL_REPLICAS, placement.num_local_replicas),
        (REPLICA_INDEX_OFFSET, placement.replica_index_offset),
    ):
        if name in environ and _int(environ, name, expected) != expected:
            raise ValueError(
                f"{name}={environ[name]} disagrees with {NUM_TOTAL_REPLICAS}="
                f"{placement.num_total_replicas}, {NUM_INSTANCES}={placement.num_instances} and "
                f"{INSTANCE_INDEX}={placement.instance_index}, which make it {expected}"
            )
    return placement


def cluster_from_tf_config(environ: Mapping[str, str] | None = None) -> dict | None:
    """The parsed `TF_CONFIG`, or None when it is unset."""
    environ = os.environ if environ is None else environ
    raw = environ.get(TF_CONFIG, "")
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"{TF_CONFIG} is not valid JSON ({error}): {raw!r}") from None


def tf_config_for(addresses: list[str], index: int) -> str:
    """`TF_CONFIG` of instance `index` in a cluster of one worker task per address."""
    return json.dumps(
        {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
    )


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "")
    if not raw.strip():
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"The environment variable {name}={raw!r} is not an integer") from None


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    value = _int(environ, name, default)
    if value < 1:
        raise ValueError(f"The environment variable {name}={value} must be at least 1")
    return value
