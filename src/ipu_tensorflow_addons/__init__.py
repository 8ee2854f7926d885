"""IPU TensorFlow Addons: Keras layers and optimizers made for the IPU.

The TF1 layers (`ipu_tensorflow_addons.v1.layers`) are not implemented yet.

Only re-exports: the implementation lives in `openipu._src.addons` (and, for the layers
shared with `tensorflow.python.ipu.keras.layers`, in `openipu._src.keras.layers`).
"""

from ipu_tensorflow_addons import keras

__all__ = ["keras"]
