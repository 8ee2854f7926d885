"""Popnn normalisation operators (`ipu.normalization_ops`): group, instance and layer norm.

All three are group normalisation: statistics per batch entry and per group
of channels, over every other dimension. Instance norm has one channel per
group, layer norm one group. There are no moving statistics, so `training`
does not change the numbers.

Channel grouping: with `strided_channel_grouping` (Popnn's fast layout) channel
`c` belongs to group `c % groups`; without it, to group `c // (C / groups)`
(contiguous blocks, the usual definition and `tf.keras.layers.GroupNormalization`).

The functions create `beta` and `gamma` (shape `[C]`) TF1-style in a
variable scope; `tf1_variables` makes that work inside TF2 functions too.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from openipu._src.int_like import plain_int
from openipu._src.ops import tf1_variables


def group_norm(
    inputs,
    groups: int = 2,
    channels_axis: int = -1,
    center: bool = True,
    scale: bool = True,
    epsilon: float = 1.53e-05,
    param_initializers=None,
    reuse=None,
    variables_collections=None,
    training: bool = True,
    trainable: bool = True,
    scope=None,
    strided_channel_grouping: bool = True,
) -> tf.Tensor:
    """Group normalisation (https://arxiv.org/abs/1803.08494) with trainable beta/gamma."""
    return _normalize_with_parameters(
        inputs=inputs,
        channels_axis=channels_axis,
        center=center,
        scale=scale,
        epsilon=epsilon,
        param_initializers=param_initializers,
        reuse=reuse,
        variables_collections=variables_collections,
        training=training,
        trainable=trainable,
        scope=scope,
        groups=groups,
        default_scope="GroupNorm",
        strided_channel_grouping=strided_channel_grouping,
    )


def instance_norm(
    inputs,
    channels_axis: int = -1,
    center: bool = True,
    scale: bool = True,
    epsilon: float = 1.53e-05,
    param_initializers=None,
    reuse=None,
    variables_collections=None,
    training: bool = True,
    trainable: bool = True,
    scope=None,
) -> tf.Tensor:
    """Instance normalisation: group normalisation with one channel per group."""
    return _normalize_with_parameters(
        inputs=inputs,
        channels_axis=channels_axis,
        center=center,
        scale=scale,
        epsilon=epsilon,
        param_initializers=param_initializers,
        reuse=reuse,
        variables_collections=variables_collections,
        training=training,
        trainable=trainable,
        scope=scope,
        groups=None,
        default_scope="InstanceNorm",
    )


def layer_norm(
    inputs,
    channels_axis: int = -1,
    center: bool = True,
    scale: bool = True,
    epsilon: float = 1.53e-05,
    param_initializers=None,
    reuse=None,
    variables_collections=None,
    training: bool = True,
    trainable: bool = True,
    scope=None,
) -> tf.Tensor:
    """Layer normalisation: group normalisation with all channels in one group."""
    return _normalize_with_parameters(
        inputs=inputs,
        channels_axis=channels_axis,
        center=center,
        scale=scale,
        epsilon=epsilon,
        param_initializers=param_initializers,
        reuse=reuse,
        variables_collections=variables_collections,
        training=training,
        trainable=trainable,
        scope=scope,
        groups=1,
        default_scope="LayerNorm",
    )


def channel_layout(shape: tf.TensorShape, channels_axis: int, what: str) -> tuple[int, int]:
    """The (non-negative channels axis, channel count) of inputs of `shape`, checked.

    Popnn normalises NC... (channels axis 1) or N...C (channels last) data. Messages start
    with the original's words (tensorflow/python/ipu/ops/normalization_ops.py).
    """
    shape = tf.TensorShape(shape)
    rank = shape.rank
    if rank is None:
        raise ValueError(f"Inputs have undefined rank ({what}, shape {shape}).")
    if rank < 2:
        raise ValueError(f"{what}: the inputs must have rank >= 2, got shape {shape}")
    # Plain comparisons in the original: NumPy ints work as well as ints.
    if isinstance(channels_axis, bool) or not isinstance(channels_axis, (int, np.integer)):
        raise TypeError(f"{what}: channels_axis must be an int, got {channels_axis!r}")
    if not -rank <= channels_axis < rank:
        raise ValueError(
            f"Axis is out of bounds. ({what}: channels_axis {channels_axis} is out of bounds for "
            f"rank {rank} inputs)"
        )
    axis = int(channels_axis) % rank
    if axis not in (1, rank - 1):
        raise ValueError(
            f"Unsupported data format, {what} only supports NCHW (channel axis 1) and NHWC "
            f"(channel axis -1): the channels dimension must be 1 or the last ({rank - 1}), got "
            f"channels_axis {channels_axis}"
        )
    channels = shape[axis]
    if channels is None:
        raise ValueError(
            f"Inputs have undefined channel dimension: {channels_axis}. ({what}: undefined "
            f"channels dimension {axis}, shape {shape})"
        )
    return axis, channels


def check_groups(groups: int, channels: int, what: str) -> int:
    """`groups` as the int the original's op attribute gets, checked against `channels`.

    The original compares `groups` with the channel count as given and hands it to the op's
    int attribute (int(groups)): 2.0 works as 2; a str fails the comparison (TypeError).
    """
    if isinstance(groups, (str, bytes)) or not isinstance(groups, (int, float, np.number)):
        raise TypeError(f"{what}: groups must be an int, got {groups!r}")
    if isinstance(groups, bool) or groups < 1 or groups != int(groups):
        # The original lets Poplar fail on these later; a clear error here instead.
        raise ValueError(f"{what}: groups must be an int >= 1, got {groups!r}")
    groups = int(groups)
    if groups > channels:
        raise ValueError(
            f"Invalid groups {groups} for {channels} channels. ({what}: invalid groups {groups} "
            f"for {channels} channels, there can be at most one group per channel)"
        )
    if channels % groups:
        raise ValueError(f"{channels} channels is not commensurate with {groups} groups. ({what})")
    return groups


def normalize_groups(
    inputs: tf.Tensor,
    gamma: tf.Tensor | None,
    beta: tf.Tensor | None,
    groups: int,
    channels_axis: int,
    epsilon: float,
    strided_channel_grouping: bool,
) -> tf.Tensor:
    """`(x - mean) / sqrt(var + epsilon) * gamma + beta`, statistics per (entry, group).

    `channels_axis` is non-negative and `gamma`/`beta` have shape `[C]` (or are None).
    """
    rank = inputs.shape.rank
    channels = inputs.shape[channels_axis]
    per_group = channels // groups
    # Split the channels axis into (group, member) axes. Strided grouping puts
    # the group index fastest-varying, so channel c lands in group c % groups.
    split = [per_group, groups] if strided_channel_grouping else [groups, per_group]
    group_axis = channels_axis + (1 if strided_channel_grouping else 0)
    dynamic_shape = tf.shape(inputs)
    grouped_shape = tf.concat(
        [dynamic_shape[:channels_axis], split, dynamic_shape[channels_axis + 1 :]], 0
    )
    compute_dtype = tf.float32 if inputs.dtype in (tf.float16, tf.bfloat16) else inputs.dtype
    grouped = tf.reshape(tf.cast(inputs, compute_dtype), grouped_shape)
    reduce_axes = [a for a in range(1, rank + 1) if a != group_axis]
    mean = tf.reduce_mean(grouped, axis=reduce_axes, keepdims=True)
    centered = grouped - mean
    variance = tf.reduce_mean(tf.square(centered), axis=reduce_axes, keepdims=True)
    normalized = tf.reshape(centered * tf.math.rsqrt(variance + epsilon), dynamic_shape)
    broadcast = [1] * rank
    broadcast[channels_axis] = channels
    if gamma is not None:
        normalized *= tf.reshape(tf.cast(gamma, compute_dtype), broadcast)
    if beta is not None:
        normalized += tf.reshape(tf.cast(beta, compute_dtype), broadcast)
    return tf.cast(normalized, inputs.dtype)


def _normalize_with_parameters(
    *,
    inputs,
    groups: int | None,
    channels_axis: int,
    center: bool,
    scale: bool,
    epsilon: float,
    param_initializers,
    reuse,
    variables_collections,
    training: bool,
    trainable: bool,
    scope,
    default_scope: str,
    strided_channel_grouping: bool = True,
) -> tf.Tensor:
    del training  # no moving statistics: training and inference compute the same
    what = {"GroupNorm": "group_norm", "InstanceNorm": "instance_norm"}.get(
        default_scope, "layer_norm"
    )
    inputs = tf.convert_to_tensor(inputs)
    axis, channels = channel_layout(inputs.shape, channels_axis, what)
    groups = channels if groups is None else plain_int(groups)
    groups = check_groups(groups, channels, what)
    initializers = dict(param_initializers or {})
    with tf1_variables.parameter_scope(scope, default_scope, [inputs], reuse):
        beta = gamma = None
        if center:
            beta = _parameter(
                "beta",
                channels,
                inputs.dtype,
                initializers.get("beta", tf.compat.v1.zeros_initializer()),
                variables_collections,
                trainable,
            )
        if scale:
            gamma = _parameter(
                "gamma",
                channels,
                inputs.dtype,
                initializers.get("gamma", tf.compat.v1.ones_initializer()),
                variables_collections,
                trainable,
            )
        return normalize_groups(
            inputs, gamma, beta, groups, axis, epsilon, strided_channel_grouping
        )


def _parameter(name, channels, dtype, initializer, variables_collections, trainable):
    collections = [tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.MODEL_VARIABLES]
    if isinstance(variables_collections, dict):
        collections += list(variables_collections.get(name, []))
    elif variables_collections:
        collections += list(variables_collections)
    return tf.compat.v1.get_variable(
        name,
        shape=[channels],
        dtype=dtype.base_dtype,
        initializer=initializer,
        collections=collections,
        trainable=trainable,
    )
