"""`tensorflow.python.ipu.ops.statistics_ops` (also `tensorflow.python.ipu.statistics_ops`)."""

from openipu._src.ops.statistics_ops import (
    fixed_width_bins,
    histogram,
    histogram_update,
)

__all__ = [
    "fixed_width_bins",
    "histogram",
    "histogram_update",
]
