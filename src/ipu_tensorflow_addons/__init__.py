"""IPU TensorFlow Addons: Keras layers and optimizers made for the IPU.

Only re-exports: the implementation lives in `openipu._src.addons` (and, for the layers
shared with `tensorflow.python.ipu.keras.layers`, in `openipu._src.keras.layers`).
"""

from ipu_tensorflow_addons import keras, v1

__all__ = ["keras", "v1"]
