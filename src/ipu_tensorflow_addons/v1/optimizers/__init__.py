"""Optimizers made for IPU TensorFlow (TF1).

The original's package holds no optimizer (graphcore/ipu_tensorflow_addons
ipu_tensorflow_addons/v1/optimizers/__init__.py is only its docstring): TF1 programs use
the optimizer wrappers of `tensorflow.python.ipu.optimizers`.
"""
