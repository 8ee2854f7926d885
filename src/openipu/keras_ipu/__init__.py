"""`tf.keras.ipu`: pipeline-stage helpers of Keras on the IPU (re-exports only).

As the original's keras/ipu/__init__.py, it holds the names of its `extensions`; its
`layers` and `optimizers` are subpackages.
"""

from openipu.keras_ipu import extensions, layers, optimizers
from openipu.keras_ipu.extensions import *  # noqa: F403
from openipu.keras_ipu.extensions import __all__

# The original marks a Keras built with IPU support (keras/ipu/__init__.py).
__ipu__built__ = "1"

__all__ = [*__all__, "extensions", "layers", "optimizers"]
