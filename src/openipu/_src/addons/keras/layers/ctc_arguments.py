"""Argument checks and class handling the CTC layers share."""

from __future__ import annotations

import tensorflow as tf

from openipu._src.int_like import as_attr_int, plain_int


def checked_blank_index(owner: str, blank_index) -> int:
    # The original hands blank_index to its CTC op's int attribute: 1.0 works as 1, a str is
    # a TypeError (ipu_tensorflow_addons/keras/layers/ctc.py, ops/nn_ops.py). A negative
    # index counts from the last class, as the op's (whose decoders default to -1); the
    # layer keeps the value as given (get_config).
    return as_attr_int(plain_int(blank_index), f"{owner}: blank_index")


def resolved_blank_index(blank_index: int, data: tf.Tensor) -> int | tf.Tensor:
    """The class of the blank in `data` ([..., num_classes]): a negative index counts from
    the last class, as ipu.nn_ops' CTC operations take it."""
    if blank_index >= 0:
        return blank_index
    num_classes = data.shape[-1] if data.shape.rank is not None else None
    if num_classes is None:
        return blank_index + tf.shape(data)[-1]
    return blank_index + num_classes


def keras_layer_kwargs(kwargs: dict) -> dict:
    """`kwargs` for tf_keras' Layer. The original's Keras (2.6) kept `trainable=None` as given,
    which then reads as false (keras/engine/base_layer.py); tf_keras takes only a bool."""
    if "trainable" in kwargs and kwargs["trainable"] is None:
        return {**kwargs, "trainable": False}
    return kwargs


def checked_positive_int(owner: str, name: str, value) -> int:
    # Handed to the original's decoder op as an int attribute, converted with int().
    value = as_attr_int(plain_int(value), f"{owner}: {name}")
    if value < 1:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return value


def checked_time_major_data(owner: str, blank_index: int, data) -> tf.Tensor:
    """`data` as a float tensor `[max_time, batch_size, num_classes]` that has a class `blank_index`."""
    data = tf.convert_to_tensor(data)
    if not data.dtype.is_floating:
        raise TypeError(f"{owner}: data must be floating point, got dtype {data.dtype.name}")
    if data.shape.rank is not None and data.shape.rank != 3:
        raise ValueError(
            f"{owner}: data must have shape [max_time, batch_size, num_classes], got {data.shape}"
        )
    num_classes = data.shape[-1] if data.shape.rank is not None else None
    if num_classes is not None and not -num_classes <= blank_index < num_classes:
        raise ValueError(
            f"{owner}: blank_index {blank_index} is out of range for {num_classes} classes "
            f"(a class index in [-{num_classes}, {num_classes}))"
        )
    return data


def checked_lengths(owner: str, name: str, lengths) -> tf.Tensor:
    """Per-example lengths as an int32 vector; `[B, 1]` (a Keras `Input(())` quirk) is accepted."""
    lengths = tf.convert_to_tensor(lengths)
    if not lengths.dtype.is_integer:
        raise TypeError(f"{owner}: {name} must be integers, got dtype {lengths.dtype.name}")
    if lengths.shape.rank == 2 and lengths.shape[1] == 1:
        lengths = tf.squeeze(lengths, axis=1)
    if lengths.shape.rank is not None and lengths.shape.rank != 1:
        raise ValueError(f"{owner}: {name} must have shape [batch_size], got {lengths.shape}")
    return tf.cast(lengths, tf.int32)
