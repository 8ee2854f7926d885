"""`ClipNormSettings`: gradients of a group of weights scaled down to a maximum global norm.

For each group, after accumulation and with loss scaling removed, the gradients' global L2
norm n is computed and every gradient of the group is multiplied by maxNorm / max(maxNorm, n)
(so gradients whose norm is within the limit are unchanged).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from openipu._src.popart.errors import OptionTypeError, popart_exception
from openipu._src.popart.optimizers.values import pybind_float


class ClipNormSettings:
    """`ClipNormSettings(weightIds, maxNorm)`; an empty list of ids means every weight."""

    def __init__(self, weightIds: list[str], maxNorm: float) -> None:  # noqa: N803
        if isinstance(weightIds, str) or not all(isinstance(i, str) for i in weightIds):
            raise OptionTypeError(
                f"ClipNormSettings weightIds must be a list of str, got {weightIds!r}"
            )
        self._weight_ids = list(weightIds)
        # Any float, as the original's binding takes it (willow/src/clipnormsettings.cpp checks
        # no range).
        self._max_norm = pybind_float(maxNorm, "ClipNormSettings maxNorm")
        self._all = not self._weight_ids

    @staticmethod
    def clipWeights(weightIds: list[str], maxNorm: float) -> ClipNormSettings:  # noqa: N802, N803
        if not weightIds:
            raise popart_exception("ClipNormSettings.clipWeights needs at least one weight id")
        return ClipNormSettings(weightIds, maxNorm)

    @staticmethod
    def clipAllWeights(maxNorm: float) -> ClipNormSettings:  # noqa: N802, N803
        return ClipNormSettings([], maxNorm)

    @property
    def weightIds(self) -> list[str]:  # noqa: N802
        return list(self._weight_ids)

    @property
    def maxNorm(self) -> float:  # noqa: N802
        return self._max_norm

    def getWeightIds(self) -> list[str]:  # noqa: N802
        return list(self._weight_ids)

    def getMaxNorm(self) -> float:  # noqa: N802
        return self._max_norm

    def clips_all_weights(self) -> bool:
        return self._all

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClipNormSettings):
            return NotImplemented
        return (self._weight_ids, self._max_norm, self._all) == (
            other._weight_ids,
            other._max_norm,
            other._all,
        )

    def __hash__(self) -> int:
        return hash((tuple(self._weight_ids), self._max_norm))

    def __repr__(self) -> str:
        ids = "all weights" if self._all else self._weight_ids
        return f"ClipNormSettings({ids}, maxNorm={self._max_norm})"


def check_clip_norm_settings(settings: Any, where: str) -> list[ClipNormSettings]:
    if isinstance(settings, ClipNormSettings):
        settings = [settings]
    if not isinstance(settings, (list, tuple)) or not all(
        isinstance(s, ClipNormSettings) for s in settings
    ):
        raise OptionTypeError(f"{where} must be a list of ClipNormSettings, got {settings!r}")
    return list(settings)


def clip_factors(
    settings: list[ClipNormSettings], gradients: dict[str, tf.Tensor]
) -> dict[str, tf.Tensor]:
    """The factor each clipped weight's gradient is multiplied by (weights not clipped are
    left out). `gradients` are the un-loss-scaled gradients by weight id."""
    factors: dict[str, tf.Tensor] = {}
    for group in settings:
        ids = list(gradients) if group.clips_all_weights() else group.weightIds
        missing = [i for i in ids if i not in gradients]
        if missing:
            raise popart_exception(
                f"ClipNormSettings names {missing}, which are not weights with a gradient "
                f"(weights: {sorted(gradients)})"
            )
        squares = [tf.reduce_sum(tf.square(tf.cast(gradients[i], tf.float32))) for i in ids]
        norm = tf.sqrt(tf.add_n(squares))
        factor = group.maxNorm / tf.maximum(norm, group.maxNorm)
        for weight_id in ids:
            factors[weight_id] = factors[weight_id] * factor if weight_id in factors else factor
    return factors
