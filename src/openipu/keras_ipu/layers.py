"""`tf.keras.ipu.layers`: Keras layers for the IPU (re-exports only)."""

from openipu._src.keras.layers.capture_gradients import (
    CaptureActivationGradients,
    CaptureUpstreamGradients,
)

__all__ = ["CaptureActivationGradients", "CaptureUpstreamGradients"]
