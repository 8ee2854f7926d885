"""`IPUMultiWorkerStrategy`: synchronous training on the IPUs of several workers.

The older interface (deprecated in favour of `PopDistStrategy`): the cluster
comes from a `tf.distribute` cluster resolver (usually `TF_CONFIG`). Gradients
are summed across every replica of every worker when an optimizer applies
them, so scale the loss by the global batch (`tf.nn.compute_average_loss`).
`variables_on_host` is accepted and kept: an emulated IPU's memory is the
host's, so where variables live changes no numbers. Keras `fit` is not
supported with this strategy (as documented); use `PopDistStrategy`.
"""

from __future__ import annotations

import logging

from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import ops

from openipu._src.distributed.collective_extended import IPUCollectiveExtended
from openipu._src.strategy.ipu_strategy import IPUStrategyV1

logger = logging.getLogger(__name__)


_HOST_INITIALIZER_ATTRS = {
    "_class": attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(s=[b"loc:@cpu"])),
    "_XlaCompile": attr_value_pb2.AttrValue(b=False),
    "_XlaScope": attr_value_pb2.AttrValue(s=b""),
}


class IPUMultiWorkerExtended(IPUCollectiveExtended):
    """Strategy internals of `IPUMultiWorkerStrategy`."""

    # One replica per worker (tensorflow/python/ipu/ipu_multi_worker_strategy.py: one host
    # device per worker), so the estimator's batch sizes divide by the workers.
    _program_replicas_in_sync = False
    # The original's IPUMultiWorkerExtendedV1 is TensorFlow's multi-worker engine on the
    # user's cluster: built eagerly on a non-empty one, it runs the health check whose
    # thread makes TensorFlow refuse a deep copy.
    _copy_refused_when_eager_with_cluster = True

    def __init__(
        self, container_strategy, cluster_resolver, ipu_device: str, variables_on_host: bool
    ) -> None:
        self._variables_on_host = bool(variables_on_host)
        super().__init__(container_strategy, cluster_resolver, ipu_device)

    @property
    def variables_on_host(self) -> bool:
        return self._variables_on_host

    def _get_variable_creator_initial_value(self, replica_id, device, primary_var, **kwargs):
        make_initial_value = super()._get_variable_creator_initial_value(
            replica_id, device, primary_var, **kwargs
        )
        if replica_id != 0:
            return make_initial_value

        def initial_value_on_host():
            # tensorflow/python/ipu/ipu_multi_worker_strategy.py: the initializers (and the
            # chief's broadcast of them) form one host colocation group, kept out of XLA.
            graph = ops.get_default_graph()
            with graph._attr_scope(_HOST_INITIALIZER_ATTRS):  # noqa: SLF001
                return make_initial_value()

        return initial_value_on_host


class IPUMultiWorkerStrategyV1(IPUStrategyV1):
    """Replicas on the IPUs of every worker of `cluster_resolver`, kept in sync by all-reduces."""

    _refuses_eager_python = False  # not an IPUStrategyV1 on the original

    _extended_class = IPUMultiWorkerExtended

    def __init__(
        self,
        cluster_resolver,
        ipu_device: str = "/device:IPU:0",
        variables_on_host: bool = False,
    ) -> None:
        logger.warning("%s is deprecated: use PopDistStrategy instead", type(self).__name__)
        self._cluster_resolver_argument = cluster_resolver
        self._variables_on_host = variables_on_host
        # Keras fit is not supported with this strategy, so Keras runs unextended.
        super().__init__(ipu_device, enable_keras_extensions=False)

    def _create_extended(self, ipu_device: str, cpu_device: str):
        del cpu_device  # the host of each worker is its task
        return self._extended_class(
            self, self._cluster_resolver_argument, ipu_device, self._variables_on_host
        )

    @property
    def cluster_resolver(self):
        return self.extended._cluster_resolver  # noqa: SLF001


IPUMultiWorkerStrategy = IPUMultiWorkerStrategyV1
