"""`PyWeightsIO`: user arrays that `readWeights` fills and `writeWeights` reads."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from openipu._src.popart.errors import OptionTypeError, popart_exception


class PyWeightsIO:
    """`PyWeightsIO({weight id: numpy array})`: the arrays are read and written in place."""

    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        if not isinstance(weights, Mapping):
            raise OptionTypeError(
                f"PyWeightsIO takes a dict {{weight id: numpy array}}, got {type(weights).__name__}"
            )
        for weight_id, array in weights.items():
            if not isinstance(weight_id, str) or not isinstance(array, np.ndarray):
                raise OptionTypeError(
                    f"PyWeightsIO entries must be str -> numpy array, got {weight_id!r} -> "
                    f"{type(array).__name__}"
                )
            if not array.flags.c_contiguous:
                # Weights are read and written in place, so a copy would lose them
                # (python/popart/popart_core/popart.cpp, PyWeightsIO).
                raise popart_exception(
                    f"PyWeightsIO is unable to use the provided numpy output array for tensor "
                    f"'{weight_id}' as it is not c-contiguous. Please use a function like "
                    "`numpy.ascontiguousarray()` to make contiguous before passing to PyWeightsIO"
                )
        self._weights = dict(weights)

    def contains(self, weightId: str) -> bool:  # noqa: N803 - the original's names
        return weightId in self._weights

    def weightIds(self) -> list[str]:  # noqa: N802
        return list(self._weights)

    def array(self, weight_id: str) -> np.ndarray:
        return self._weights[weight_id]
