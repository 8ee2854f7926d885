"""Deployment: `application_compile_op` (executables), the embedded runtime that runs them,
and `serving` (SavedModels for TensorFlow Serving that load in stock TensorFlow)."""
