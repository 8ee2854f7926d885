"""`CrossReplicaOptimizer`: applies the cross-replica mean of the gradients."""

from __future__ import annotations

from openipu._src.engine.replicas import lockstep
from openipu._src.ops import cross_replica_ops
from openipu._src.optimizers import ipu_optimizer, replicas


class CrossReplicaOptimizer(ipu_optimizer.IpuOptimizer):
    """Averages the gradients over all replicas, then applies them with the wrapped optimizer.

    The spec's class summary says "averages" and its `apply_gradients` note says
    "sum"; the original's code takes the mean, and so does this class.
    """

    def __init__(self, opt, name: str = "CrossReplicaOptimizer") -> None:
        super().__init__(opt, name=name)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        pairs = ipu_optimizer.check_grads_and_vars(grads_and_vars)
        pairs = [(g, v) for g, v in pairs if g is not None]
        # Replicas of a compiled program take the mean, as the original's code does. On a
        # strategy's mirrored replicas (across processes) a stock optimizer's own sum over
        # the replicas of gradient / R is the mean already.
        if lockstep.replica_count() > 1 or (
            replicas.summing_replica_count() > 1
            and isinstance(self._opt, ipu_optimizer.IpuOptimizer)
        ):
            pairs = [(cross_replica_ops.cross_replica_mean(g), v) for g, v in pairs]
        return ipu_optimizer.apply_on_each_replica(self._opt, pairs, global_step, name)
