"""`ipu_tensorflow_addons.keras.experimental.auto_pipeline`: automatic pipeline stage
assignment. The partition search is there; profiling layers needs Poplar's reports and
raises a clear error (see `openipu._src.addons.auto_pipeline`)."""
