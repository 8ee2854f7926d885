"""The most probable CTC path (`ipu_tensorflow_addons.keras.layers.CTCPredictionsLayer`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers import ctc_arguments
from openipu._src.addons.keras.layers.ctc_inference_layer import CTCInferenceLayer


@tf_keras.utils.register_keras_serializable(package="openipu")
class CTCPredictionsLayer(tf_keras.layers.Layer):
    """The most probable path of a CTC beam search, `[batch_size, max_time]` int32.

    Takes the same arguments as `CTCInferenceLayer` and runs one (with the same
    host-only restriction: no `jit_compile=True`), then keeps, per example, the
    path of smallest negative log-probability among `top_paths`; positions at
    or past its length hold `blank_index`. `from_logits` governs the input
    form, although the original's `call` text says log-probabilities. Without
    `data_length` every example uses all `max_time` steps. `get_config` holds
    the four arguments (the original returns its inner layer's config, whose
    values are the same).
    """

    def __init__(
        self,
        blank_index: int = 0,
        beam_width: int = 100,
        top_paths: int = 1,
        from_logits: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(**ctc_arguments.keras_layer_kwargs(kwargs))
        self.inference_layer = CTCInferenceLayer(
            blank_index=blank_index,
            beam_width=beam_width,
            top_paths=top_paths,
            from_logits=from_logits,
            name="ctc_inference",
        )

    def call(self, data, data_length=None, **kwargs):
        probs, lengths, decoded = self.inference_layer(data, data_length)
        best = tf.argmin(probs, axis=1, output_type=tf.int32)
        best_path = tf.gather(decoded, best, axis=1, batch_dims=1)
        best_length = tf.gather(lengths, best, axis=1, batch_dims=1)
        past_the_end = tf.range(tf.shape(best_path)[1])[None, :] >= best_length[:, None]
        blank = tf.constant(self.inference_layer.blank_index, tf.int32)
        return tf.where(past_the_end, blank, best_path)

    def get_config(self) -> dict:
        inner = self.inference_layer
        return {
            **super().get_config(),
            "blank_index": inner.blank_index,
            "beam_width": inner.beam_width,
            "top_paths": inner.top_paths,
            "from_logits": inner.from_logits,
        }
