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
        # Kept unchecked, as the original (optimizers/map_gradient_optimizer.py:78-79): a
        # function that cannot be called fails when gradients are computed.
        super().__init__(wrapped_optimizer, name=name)
        self._gradient_mapping_function = gradient_mapping_function

    def compute_gradients(self, *args, **kwargs) -> list[tuple]:
        grads_and_vars = super().compute_gradients(*args, **kwargs)
        if grads_and_vars and not callable(self._gradient_mapping_function):
            # The original calls it for every pair, gradient or not (:98-101): Python's error.
            raise TypeError(
                f"{type(self._gradient_mapping_function).__name__!r} object is not callable"
            )
        return [
            (None if g is None else self._gradient_mapping_function(g, v), v)
            for g, v in grads_and_vars
        ]
