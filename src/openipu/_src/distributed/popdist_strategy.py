"""`PopDistStrategy`: data-parallel replicas across the instances `poprun` starts.

Each instance runs the replicas of its IPU device (configured with
`popdist.tensorflow.set_ipu_config`); the strategy reduces over all of them
(see `collective_extended`). The cluster is the one `poprun` describes in
`TF_CONFIG`; without it the strategy is one instance's replicas, like
`IPUStrategy`. Keras `fit` works as under `IPUStrategy`: each instance feeds
its own data (shard the dataset by `popdist.getInstanceIndex()`), and the
loss is scaled by the global replica count.
"""

from __future__ import annotations

from openipu._src.distributed import environment
from openipu._src.distributed.collective_extended import IPUCollectiveExtended
from openipu._src.strategy.ipu_strategy import IPUStrategyV1
from openipu._src.system import configure


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
        check_placement(
            "PopDistStrategy", self.process_count, self.process_index, self.device_ipus()
        )

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


def check_placement(what: str, process_count: int, process_index: int, local_slots: int) -> None:
    """The strategy's processes and IPUs agree with `poprun`'s environment and the IPUConfig."""
    if environment.is_set():
        placement = environment.current_placement()
        if placement.num_instances != process_count:
            raise ValueError(
                f"{what}: poprun started {placement.num_instances} instance(s) "
                f"({environment.NUM_INSTANCES}) but the cluster ({environment.TF_CONFIG}) has "
                f"{process_count} worker process(es)"
            )
        if local_slots % placement.num_local_replicas:
            raise ValueError(
                f"{what}: this instance runs {placement.num_local_replicas} replica(s) "
                f"({environment.NUM_LOCAL_REPLICAS}) but its IPU device has {local_slots} IPU(s), "
                "not a multiple of that: configure the IPUs with "
                "popdist.tensorflow.set_ipu_config(config) before configure_ipu_system"
            )
    system = configure.maybe_current_system()
    if system is not None:
        distribution = system.config.experimental.multi_replica_distribution
        if distribution.process_count and distribution.process_count != process_count:
            raise ValueError(
                f"{what}: the IPUConfig says experimental.multi_replica_distribution."
                f"process_count={distribution.process_count}, but the strategy's cluster has "
                f"{process_count} process(es)"
            )
        if distribution.process_count and distribution.process_index != process_index:
            raise ValueError(
                f"{what}: the IPUConfig says experimental.multi_replica_distribution."
                f"process_index={distribution.process_index}, but this process is "
                f"{process_index} in the strategy's cluster"
            )
