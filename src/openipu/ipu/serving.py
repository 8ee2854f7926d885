"""`tensorflow.python.ipu.serving`: export models as SavedModels for TensorFlow Serving."""

from tensorflow import Tensor

from openipu._src.serving.export import export_keras, export_pipeline, export_single_step

__all__ = ["Tensor", "export_keras", "export_pipeline", "export_single_step"]
