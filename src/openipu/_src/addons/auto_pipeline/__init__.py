"""Automatic pipeline stage assignment (`ipu_tensorflow_addons.keras.experimental.auto_pipeline`).

The partition search works on model profiles (per-layer cycles and memory) as
the original's does. Producing those profiles needs Poplar's per-layer
compilation reports (PVA), which emulated IPUs do not write (openipu's cost model
writes reports of its own format): the profiling functions raise saying so (`profiling`).
"""
