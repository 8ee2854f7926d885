"""Keras optimizer wrappers for the IPU (`keras.ipu.optimizers`)."""
