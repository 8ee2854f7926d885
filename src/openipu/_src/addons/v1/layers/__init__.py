"""TF1 Popnn recurrent layers (`ipu_tensorflow_addons.v1.layers`), one layer per module."""
