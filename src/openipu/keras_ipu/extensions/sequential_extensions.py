"""`tf.keras.ipu.extensions.sequential_extensions` (re-exports only)."""

from openipu._src.keras.extensions.extension_kinds import SequentialExtension

__all__ = ["SequentialExtension"]
