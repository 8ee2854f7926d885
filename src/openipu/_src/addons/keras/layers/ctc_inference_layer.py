"""The CTC beam-search layer (`ipu_tensorflow_addons.keras.layers.CTCInferenceLayer`)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from openipu._src.addons.keras.layers import ctc_arguments


@tf_keras.utils.register_keras_serializable(package="openipu")
class CTCInferenceLayer(tf_keras.layers.Layer):
    """CTC beam-search decoding of time-major data `[max_time, batch_size, num_classes]`.

    `call(data, data_length)` returns `(probs, lengths, decoded)`: the
    **negative** log-probability of each path `[batch_size, top_paths]`, the
    path lengths `[batch_size, top_paths]` int32 and the paths
    `[batch_size, top_paths, max_time]` int32, filled with `blank_index` past
    each length. `data` are log-probabilities, or logits with `from_logits=True`.
    `top_paths` must not exceed `beam_width`.

    Where it runs: the decoding is `tf.nn.ctc_beam_search_decoder`, which has
    no XLA kernel, so this layer works eagerly and in ordinary `tf.function`s
    and Keras `predict` (whose default is not to XLA-compile on the host), but
    not inside a `jit_compile=True` region, where TensorFlow reports the
    missing kernel. Its blank is the last class: classes are permuted so that
    `blank_index` comes last and the decoded ids are mapped back. Paths of
    equal probability may be ordered differently from the IPU.
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
        owner = type(self).__name__
        self.blank_index = ctc_arguments.checked_blank_index(owner, blank_index)
        self.beam_width = ctc_arguments.checked_positive_int(owner, "beam_width", beam_width)
        self.top_paths = ctc_arguments.checked_positive_int(owner, "top_paths", top_paths)
        if self.top_paths > self.beam_width:
            raise ValueError(
                f"{owner}: top_paths must be at most beam_width={self.beam_width}, "
                f"got {self.top_paths}"
            )
        self.from_logits = from_logits  # by truth value, as the original

    def call(self, data, data_length=None, **kwargs):
        owner = type(self).__name__
        data = ctc_arguments.checked_time_major_data(owner, self.blank_index, data)
        max_time, batch_size, num_classes = tf.unstack(tf.shape(data))
        if data_length is None:
            data_length = tf.fill([batch_size], max_time)
        data_length = ctc_arguments.checked_lengths(owner, "data_length", data_length)
        # The decoder's kernel is float32/float64 only.
        log_probs = tf.cast(data, tf.float32) if data.dtype != tf.float64 else data
        if self.from_logits:
            log_probs = tf.nn.log_softmax(log_probs, axis=-1)
        blank = ctc_arguments.resolved_blank_index(self.blank_index, data)
        blank_last_order = tf.concat(
            [
                tf.range(blank),
                tf.range(blank + 1, num_classes),
                [blank],
            ],
            axis=0,
        )
        decoded_paths, log_probability = tf.nn.ctc_beam_search_decoder(
            tf.gather(log_probs, blank_last_order, axis=-1),
            data_length,
            beam_width=self.beam_width,
            top_paths=self.top_paths,
        )
        dense_paths, path_lengths = [], []
        for path in decoded_paths:
            ids = tf.cast(path.values, tf.int32)
            # Undo the permutation: ids at or above the blank moved down by one.
            ids = tf.where(ids >= blank, ids + 1, ids)
            dense_paths.append(
                tf.tensor_scatter_nd_update(
                    tf.fill([batch_size, max_time], tf.cast(blank, tf.int32)),
                    path.indices,
                    ids,
                )
            )
            path_lengths.append(
                tf.math.unsorted_segment_sum(
                    tf.ones_like(ids), tf.cast(path.indices[:, 0], tf.int32), batch_size
                )
            )
        probs = tf.cast(-log_probability, data.dtype)
        return probs, tf.stack(path_lengths, axis=1), tf.stack(dense_paths, axis=1)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "blank_index": self.blank_index,
            "beam_width": self.beam_width,
            "top_paths": self.top_paths,
            "from_logits": self.from_logits,
        }
