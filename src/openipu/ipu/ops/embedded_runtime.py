"""`tensorflow.python.ipu.embedded_runtime`: run an executable from TensorFlow."""

from openipu._src.serving.embedded_runtime import (
    RuntimeContext,
    embedded_runtime_call,
    embedded_runtime_start,
    embedded_runtime_start_and_call,
    embedded_runtime_stop,
)

__all__ = [
    "RuntimeContext",
    "embedded_runtime_call",
    "embedded_runtime_start",
    "embedded_runtime_start_and_call",
    "embedded_runtime_stop",
]
