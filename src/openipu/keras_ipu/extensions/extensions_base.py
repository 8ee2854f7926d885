"""`tf.keras.ipu.extensions.extensions_base` (re-exports only): the class every model
with the IPU extensions is an instance of."""

from openipu._src.keras.extensions.model_extensions import KerasExtensions as KerasExtensionBase

__all__ = ["KerasExtensionBase"]
