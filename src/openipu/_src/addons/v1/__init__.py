"""The TF1 (graph-mode) addons: `ipu_tensorflow_addons.v1`."""
