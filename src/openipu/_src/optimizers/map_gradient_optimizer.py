"""`MapGradientOptimizer`: maps every computed gradient before it is applied."""

from __future__ import annotations

from collections.abc import Callable

from openipu._src.optimizers import ipu_optimizer


class MapGradientOptimizer(ipu_optimizer.IpuOptimizer):
    """`compute_gradients` returns `(gradient_mapping_function(g, v), v)` for every pair.

    Variables without a gradient keep None (the function is not called for them).
    """

    def __init__(
        self,
        wrapped_optimizer,
        gradient_mapping_function: Callable,
        name: str = "MapGradientOptimizer",
    ) -> None:
        if not callable(gradient_mapping_function):
            raise TypeError(
                "MapGradientOptimizer: gradient_mapping_function must be callable, "
                f"got {gradient_mapping_function!r}"
            )
        super().__init__(wrapped_optimizer, name=name)
        self._gradient_mapping_function = gradient_mapping_function

    def compute_gradients(self, *args, **kwargs) -> list[tuple]:
        return [
            (None if g is None else self._gradient_mapping_function(g, v), v)
            for g, v in super().compute_gradients(*args, **kwargs)
        ]
