"""Raw configuration operations of the original's IPU backend (`gen_ipu_ops`).

Only `ipu_get_configuration`, which programs and the original's tests run to read back
the `IpuOptions` the devices hold (tensorflow/compiler/plugin/poplar/kernels/ipu_kernels.cc,
`IpuGetConfigurationOp`).
"""

from __future__ import annotations

import tensorflow as tf

from openipu._src.system import configure


def _serialized_options() -> tf.Tensor:
    serialized = [options.SerializeToString() for options in configure.configured_ipu_options()]
    return tf.constant(serialized, dtype=tf.string, shape=[len(serialized)])


def ipu_get_configuration(name: str | None = None) -> tf.Tensor:
    """A string vector: the serialized `IpuOptions` of each configured IPU device, read when
    the operation runs (empty if no system is configured)."""
    result = tf.py_function(_serialized_options, [], tf.string, name=name)
    result.set_shape([None])
    return result
