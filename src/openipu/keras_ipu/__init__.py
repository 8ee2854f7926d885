"""`tf.keras.ipu`: pipeline-stage helpers of Keras on the IPU (re-exports only)."""
