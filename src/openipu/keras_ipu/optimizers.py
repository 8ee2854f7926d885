"""`tf.keras.ipu.optimizers`: Keras optimizer wrappers for the IPU (re-exports only)."""

from openipu._src.keras.optimizers.als_optimizer import ALSOptimizer

__all__ = ["ALSOptimizer"]
