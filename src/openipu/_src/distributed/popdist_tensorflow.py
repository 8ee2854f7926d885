"""`popdist.tensorflow`: configuring an instance's IPUs from `poprun`'s environment."""

from __future__ import annotations

from openipu._src.config.ipu_config import IPUConfig
from openipu._src.distributed import environment, popdist_api


def set_ipu_config(config, ipus_per_replica: int | None = None, configure_device: bool = True):
    """Writes this instance's part of the run into `config` (an IPUConfig); returns it.

    Sets `experimental.multi_replica_distribution.process_count/process_index`
    and, with `configure_device`, selects the device holding this instance's
    IPUs: its local replicas times `ipus_per_replica` (default: poprun's
    `--ipus-per-replica`).
    """
    if not isinstance(config, IPUConfig):
        raise TypeError(f"set_ipu_config needs an IPUConfig, got {type(config).__name__}")
    placement = environment.current_placement()
    if ipus_per_replica is None:
        ipus_per_replica = placement.num_ipus_per_replica
    if isinstance(ipus_per_replica, bool) or not isinstance(ipus_per_replica, int):
        raise TypeError(
            f"set_ipu_config: ipus_per_replica must be an int, got {ipus_per_replica!r}"
        )
    if ipus_per_replica < 1:
        raise ValueError(
            f"set_ipu_config: ipus_per_replica must be at least 1, got {ipus_per_replica}"
        )
    if configure_device:
        config.select_ipus = [
            popdist_api.getDeviceId(placement.num_local_replicas * ipus_per_replica)
        ]
    distribution = config.experimental.multi_replica_distribution
    distribution.process_count = placement.num_instances
    distribution.process_index = placement.instance_index
    return config
