"""`PopDistStrategy`: data-parallel replicas across the instances `poprun` starts.

Each instance runs the replicas of its IPU device (configured with
`popdist.tensorflow.set_ipu_config`); the strategy reduces over all of them
(see `collective_extended`). The processes reduce over the cluster `poprun` describes in
`TF_CONFIG` (the emulation's transport); without it the strategy is one
instance's replicas, like `IPUStrategy`. Keras `fit` works as under `IPUStrategy`: each instance feeds
its own data (shard the dataset by `popdist.getInstanceIndex()`), and the
loss is scaled by the global replica count.
"""

from __future__ import annotations

from openipu._src.distributed import environment
from openipu._src.distributed.collective_extended import IPUCollectiveExtended
from openipu._src.strategy.ipu_strategy import IPUStrategyV1


class PopDistExtendedV1(IPUCollectiveExtended):
    """Strategy internals of `PopDistStrategy`."""

    def __init__(
        self,
        container_strategy,
        cluster_resolver,
        ipu_device: str,
        add_ipu_cross_replica_reductions: bool,
    ) -> None:
        # Without it, a reduction inside an IPU program returns the replica's own value
        # (tensorflow/python/ipu/distributed/popdist_strategy.py `_reduce_to`).
        self._add_ipu_cross_replica_reductions = bool(add_ipu_cross_replica_reductions)
        super().__init__(container_strategy, cluster_resolver, ipu_device)
        if self.ipu_ordinal is not None:
            check_device_replicas(self.device_ipus())

    @property
    def add_ipu_cross_replica_reductions(self) -> bool:
        return self._add_ipu_cross_replica_reductions


class PopDistStrategy(IPUStrategyV1):
    """Replicas on the IPUs of every `poprun` instance, kept in sync by all-reduces."""

    _refuses_eager_python = False  # not an IPUStrategyV1 on the original

    def __init__(
        self,
        ipu_device: str = "/device:IPU:0",
        add_ipu_cross_replica_reductions: bool = True,
        enable_dataset_iterators: bool = True,
        enable_keras_extensions: bool = True,
    ) -> None:
        self._add_ipu_cross_replica_reductions = add_ipu_cross_replica_reductions
        super().__init__(
            ipu_device,
            enable_dataset_iterators=enable_dataset_iterators,
            enable_keras_extensions=enable_keras_extensions,
        )

    def _create_extended(self, ipu_device: str, cpu_device: str):
        del cpu_device  # the host of each instance is its worker task
        return PopDistExtendedV1(self, None, ipu_device, self._add_ipu_cross_replica_reductions)

    def update_ipu_config(self, config):
        """Writes this strategy's process count and index into `config`; returns it."""
        distribution = config.experimental.multi_replica_distribution
        distribution.process_count = self.extended.process_count
        distribution.process_index = self.extended.process_index
        return config


def check_device_replicas(device_ipus: int) -> None:
    """Under `poprun`, the instance's IPU device holds whole replicas.

    The original compares nothing else when it builds the strategy
    (tensorflow/python/ipu/distributed/popdist_strategy.py:60-76, 147-172): its cluster
    is empty and its counts come from popdist, so neither `TF_CONFIG` (the emulation's
    transport, which `poprun` writes to agree with the PopDist variables) nor the
    IPUConfig's multi_replica_distribution is compared with them.
    """
    if not environment.is_set():
        return
    local_replicas = environment.current_placement().num_local_replicas
    if device_ipus % local_replicas:
        raise ValueError(
            f"PopDistStrategy: this instance runs {local_replicas} replica(s) "
            f"({environment.NUM_LOCAL_REPLICAS}) but its IPU device has {device_ipus} IPU(s), "
            "not a multiple of that: configure the IPUs with "
            "popdist.tensorflow.set_ipu_config(config) before configure_ipu_system"
        )
