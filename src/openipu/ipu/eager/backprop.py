"""`tensorflow.python.ipu.eager.backprop`: gradient capture contexts."""

from openipu._src.eager.backprop import (
    GradientCaptureContext,
    GradientCaptureTape,
    num_gradient_collection_tapes,
)

__all__ = ["GradientCaptureContext", "GradientCaptureTape", "num_gradient_collection_tapes"]
