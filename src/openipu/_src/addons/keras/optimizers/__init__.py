"""See `ipu_tensorflow_addons` for the public names; modules here are imported directly."""
