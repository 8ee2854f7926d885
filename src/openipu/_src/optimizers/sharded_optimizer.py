"""`ShardedOptimizer`: gradients computed on the shard of the operation they come from."""

from __future__ import annotations

from openipu._src.optimizers import ipu_optimizer


class ShardedOptimizer(ipu_optimizer.IpuOptimizer):
    """Computes each gradient next to its forward operation; the numbers are the wrapped's.

    On the IPU this keeps a sharded model's backward pass on the forward pass's
    shards; here gradients are colocated with their operations, which only
    matters for device placement.
    """

    def __init__(self, optimizer) -> None:
        super().__init__(optimizer, name="ShardedOptimizer")

    def compute_gradients(self, loss, var_list=None, **kwargs) -> list[tuple]:
        kwargs["colocate_gradients_with_ops"] = True
        return super().compute_gradients(loss, var_list=var_list, **kwargs)
