"""`tensorflow.python.ipu.ops.experimental`."""
