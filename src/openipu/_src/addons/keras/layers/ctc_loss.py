"""The CTC loss layer (`ipu_tensorflow_addons.keras.layers.CTCLoss`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers import ctc_arguments


@tf_keras.utils.register_keras_serializable(package="openipu")
class CTCLoss(tf_keras.layers.Layer):
    """Connectionist Temporal Classification loss, averaged over the batch.

    `call(labels, data, label_length, data_length)` takes labels
    `[batch_size, max_label_length]`, **time-major** data
    `[max_time, batch_size, num_classes]` and the two length vectors, and
    returns a shape-`[1]` tensor: the batch mean of each example's negative
    log-likelihood (not normalised by length), in the dtype of `data`.

    CONFLICT (fact sheet 1.2): with `from_logits=False` the data are plain
    log-probabilities (as the original's tests feed `log_softmax` output), not
    negative log-probabilities as the low-level op's text says. With
    `from_logits=True` a softmax is applied first. The numbers are those of
    `tf.nn.ctc_loss` (dense labels), which also compiles under XLA.
    """

    def __init__(self, blank_index: int = 0, from_logits: bool = False, **kwargs) -> None:
        super().__init__(**ctc_arguments.keras_layer_kwargs(kwargs))
        self.blank_index = ctc_arguments.checked_blank_index("CTCLoss", blank_index)
        self.from_logits = from_logits  # by truth value, as the original

    def call(self, labels, data, label_length, data_length, **kwargs):
        data = ctc_arguments.checked_time_major_data("CTCLoss", self.blank_index, data)
        labels = tf.convert_to_tensor(labels)
        if not labels.dtype.is_integer:
            raise TypeError(f"CTCLoss: labels must be integers, got dtype {labels.dtype.name}")
        if labels.shape.rank is not None and labels.shape.rank != 2:
            raise ValueError(
                f"CTCLoss: labels must have shape [batch_size, max_label_length], got {labels.shape}"
            )
        label_length = ctc_arguments.checked_lengths("CTCLoss", "label_length", label_length)
        data_length = ctc_arguments.checked_lengths("CTCLoss", "data_length", data_length)
        # Half-precision data are accumulated in float32, as the IPU's partials are.
        log_probs = tf.cast(data, tf.float32) if data.dtype != tf.float64 else data
        if self.from_logits:
            log_probs = tf.nn.log_softmax(log_probs, axis=-1)
        per_example = tf.nn.ctc_loss(
            tf.cast(labels, tf.int32),
            log_probs,
            label_length,
            data_length,
            logits_time_major=True,
            blank_index=ctc_arguments.resolved_blank_index(self.blank_index, data),
        )
        return tf.cast(tf.reshape(tf.reduce_mean(per_example), [1]), data.dtype)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "blank_index": self.blank_index,
            "from_logits": self.from_logits,
        }
