"""The AssumeEqualAcrossReplicas layer (`ipu.keras.layers.AssumeEqualAcrossReplicas`)."""

from __future__ import annotations

import tf_keras


@tf_keras.utils.register_keras_serializable(package="openipu")
class AssumeEqualAcrossReplicas(tf_keras.layers.Layer):
    """Marks values as equal on every replica (so conditionals on them are not divergent).

    `inplace` operates on the tensors in place rather than on copies (needed for
    tensor slices on the IPU); the values are unchanged either way.
    """

    def __init__(self, inplace: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        # Read for its truth only, as the original (ipu_tensorflow_addons/keras/layers/
        # assume_equal_across_replicas.py, ops/cross_replica_ops.py `if not inplace`).
        self.inplace = inplace

    def call(self, inputs, **kwargs):
        # Looked up on the public module at each call, as the original's layer does, so
        # that programs (and the original's tests) can patch the op there.
        from openipu.ipu.ops import cross_replica_ops

        return cross_replica_ops.assume_equal_across_replicas(inputs, self.inplace)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "inplace": self.inplace}
