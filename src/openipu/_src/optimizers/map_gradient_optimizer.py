"""`MapGradientOptimizer`: maps every computed gradient before it is applied."""

from __future__ import annotations

from collections.abc import Callable

from openipu._src.optimizers import ipu_optimizer


class MapGradientOptimizer(ipu_optimizer.IpuOptimizer):
    """`compute_gradients` returns `(gradient_mapping_function(g, v.value()), v)` per pair.

    As the original (optimizers/map_gradient_optimizer.py:98-101), the function is called
    for every pair, a variable without a gradient included (its gradient is passed as
    None), and is given the variable's value, not the variable; what it returns is the pair's
    gradient, None or not.
    """

    def __init__(
        self,
        wrapped_optimizer,
        gradient_mapping_function: Callable,
        name: str = "MapGradientOptimizer",
    ) -> None:
        # Kept unchecked, as the original (optimizers/map_gradient_optimizer.py:78-79): a
        # function that cannot be called fails (Python's TypeError) when gradients are
        # computed, and only if there is a pair to map.
        super().__init__(wrapped_optimizer, name=name)
        self._gradient_mapping_function = gradient_mapping_function

    def compute_gradients(self, *args, **kwargs) -> list[tuple]:
        grads_and_vars = super().compute_gradients(*args, **kwargs)
        mapping = self._gradient_mapping_function
        return [(mapping(g, v.value()), v) for g, v in grads_and_vars]
