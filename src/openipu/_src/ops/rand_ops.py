"""Poprand operators (`ipu.rand_ops`): dropout.

The mask comes from a stateless random op keyed by a seed pair: the user's
2 x int32 seed, or one drawn from the emulated IPU's seed stream (so that
`utils.reset_ipu_seed` makes unseeded dropout repeat; in a TF1 graph, one from a random
op under TensorFlow's graph-level seed). The backward pass
regenerates the mask from that seed instead of keeping it, as the IPU does.
The Philox algorithm is named explicitly so that eager and XLA execution give
the same mask.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from openipu._src.system import seeds

logger = logging.getLogger(__name__)


def dropout(x, rate: float = 0.5, noise_shape=None, seed=None, name=None, **kwargs) -> tf.Tensor:
    """Zeroes each element of `x` with probability `rate`; scales the rest by 1 / (1 - rate)."""
    # `ref` picks how the original's kernel keeps its reference tensor: no effect on values.
    kwargs.pop("ref", None)
    if kwargs:
        logger.warning("rand_ops.dropout: ignoring unsupported arguments %s", sorted(kwargs))
    # The original compares `rate` with 0 and 1 as it is: any real number (a NumPy array of
    # one value, a bool) passes the same range check (ops/rand_ops.py).
    try:
        if isinstance(rate, (str, bytes)):  # not comparable with numbers
            raise TypeError
        rate = float(rate)
    except (TypeError, ValueError):
        raise TypeError(f"dropout: rate must be a float in [0, 1), got {rate!r}") from None
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"The rate must be in the range [0, 1), but was {rate}")
    with tf.name_scope(name or "dropout"):
        x = tf.convert_to_tensor(x)
        if not x.dtype.is_floating:
            raise TypeError(f"dropout: x must be floating point, got dtype {x.dtype.name}")
        seed = device_seed() if seed is None else checked_seed(seed)
        mask_shape = dropout_mask_shape(x, noise_shape)
        return seeded_dropout(x, seed, mask_shape, float(rate))


def checked_seed(seed) -> tf.Tensor:
    """A user seed as an int32 tensor of shape [2]."""
    seed = tf.convert_to_tensor(seed)
    if not seed.dtype.is_integer:
        raise TypeError(
            f"dropout: seed must be a pair of 32-bit integers, got dtype {seed.dtype.name}"
        )
    if seed.shape != [2]:
        raise ValueError(f"Expected the seed to have a shape [2], but got {seed.shape}.")
    return tf.cast(seed, tf.int32)


def device_seed() -> tf.Tensor:
    if not tf.compat.v1.executing_eagerly_outside_functions():
        # A TF1 graph cannot capture the device's (eager) seed stream: the seed comes from a
        # random op of the graph, under TensorFlow's graph-level seeding, drawn once per run
        # and shared by the forward and backward passes.
        return tf.random.uniform([2], minval=0, maxval=np.iinfo(np.int32).max, dtype=tf.int32)
    return seeds.generator(device_ordinal=0, replica=0).make_seeds(1)[:, 0]


def dropout_mask_shape(x: tf.Tensor, noise_shape) -> tf.Tensor:
    """`noise_shape` with unknown (None) entries taken from `x`, as in `tf.nn.dropout`.

    As the original (tensorflow/python/ipu/ops/rand_ops.py), an empty noise shape means the
    shape of `x`, and a static one must have the rank of `x` and, where it is not 1, its
    dimensions.
    """
    if noise_shape is None or (isinstance(noise_shape, (list, tuple)) and not noise_shape):
        return tf.shape(x)
    if isinstance(noise_shape, (list, tuple)) and x.shape.rank is not None:
        if len(noise_shape) != x.shape.rank:
            raise ValueError(
                f"The length of noise_shape must equal the rank of x. (noise_shape "
                f"{list(noise_shape)}, x shape {x.shape})"
            )
        for x_dim, noise_dim in zip(x.shape.as_list(), noise_shape, strict=True):
            if noise_dim not in (1, None) and x_dim is not None and x_dim != noise_dim:
                raise ValueError(f"Dimension mismatch, {x_dim} != {noise_dim}.")
    if isinstance(noise_shape, (list, tuple)) and any(d is None for d in noise_shape):
        x_shape = tf.shape(x)
        return tf.stack([x_shape[i] if d is None else d for i, d in enumerate(noise_shape)])
    noise_shape = tf.convert_to_tensor(noise_shape, tf.int32)
    static = tf.get_static_value(noise_shape)
    if static is not None and x.shape.rank is not None:
        try:
            tf.broadcast_static_shape(x.shape, tf.TensorShape(static.tolist()))
        except ValueError:
            raise ValueError(
                f"dropout: noise_shape {static.tolist()} does not broadcast to x {x.shape}"
            ) from None
    return noise_shape


def _keep_mask(mask_shape: tf.Tensor, seed: tf.Tensor, rate: float) -> tf.Tensor:
    uniform = tf.random.stateless_uniform(mask_shape, seed, alg="philox")
    return uniform >= rate


def seeded_dropout(
    x: tf.Tensor, seed: tf.Tensor, mask_shape: tf.Tensor, rate: float, scale: float | None = None
):
    """`x` with elements dropped with probability `rate` (by a mask drawn from `seed`), the
    others multiplied by `scale` (by default 1 / (1 - rate))."""
    if scale is None:
        scale = 1.0 / (1.0 - rate)

    def apply(values: tf.Tensor) -> tf.Tensor:
        keep = _keep_mask(mask_shape, seed, rate)
        scaled = values * tf.cast(scale, values.dtype)
        return tf.where(keep, scaled, tf.zeros_like(scaled))

    @tf.custom_gradient
    def seeded(values):
        # The gradient regenerates the mask from the seed instead of storing it.
        return apply(values), apply

    return seeded(x)
