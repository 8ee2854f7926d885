"""Every change openipu makes to TensorFlow/Keras internals, one module per patch."""
