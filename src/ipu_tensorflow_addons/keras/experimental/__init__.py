"""`ipu_tensorflow_addons.keras.experimental`: experimental Keras tools (re-exports only)."""
