"""`tf.keras.ipu.extensions.functional_extensions` (re-exports only)."""

from openipu._src.keras.extensions.extension_kinds import FunctionalExtension

__all__ = ["FunctionalExtension"]
