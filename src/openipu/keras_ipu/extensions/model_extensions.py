"""`tf.keras.ipu.extensions.model_extensions` (re-exports only)."""

from openipu._src.keras.extensions.extension_kinds import ModelExtension

__all__ = ["ModelExtension"]
