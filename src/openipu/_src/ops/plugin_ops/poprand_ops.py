"""Raw PopRand dropout operations (`gen_poprand_ops`), as the original registers them
(tensorflow/compiler/plugin/poplar/ops/poprand/dropout_tf.cc).

Unlike `ipu.rand_ops.dropout`, their `rate` is the probability of *keeping* an element
(the original's ops/rand_ops.py passes `rate=1 - rate`), and `scale` multiplies the kept
elements. Besides the result they give the seed the mask was drawn from (an int32 pair:
the one given, else a fresh one from the device's seed stream, different for every call,
replica and run) and, in the forms without `NoRef`, a `reference`: a scalar variant that
stands for the original's opaque tile-mapping reference, only to be handed to
`ipu_dropout_with_seed_and_reference`. The mask is the one `ipu.rand_ops.dropout` draws
from the same seed.
"""

from __future__ import annotations

import collections

import tensorflow as tf

from openipu._src.ops import rand_ops

_DTYPES = (tf.float16, tf.float32, tf.int32)

IpuDropout = collections.namedtuple("IpuDropout", ["output", "seed", "reference"])
IpuDropoutNoRef = collections.namedtuple("IpuDropoutNoRef", ["output", "seed"])
IpuDropoutWithSeed = collections.namedtuple(
    "IpuDropoutWithSeed", ["output", "output_seed", "reference"]
)
IpuDropoutWithSeedNoRef = collections.namedtuple(
    "IpuDropoutWithSeedNoRef", ["output", "output_seed"]
)
IpuDropoutWithSeedAndReference = collections.namedtuple(
    "IpuDropoutWithSeedAndReference", ["output", "output_seed"]
)


def _dropped(what: str, values, seed, rate, scale, noise_shape) -> tuple[tf.Tensor, tf.Tensor]:
    """The dropout result and the seed its mask came from (drawn when `seed` is None)."""
    x = tf.convert_to_tensor(values)
    if x.dtype not in _DTYPES:
        raise TypeError(f"{what}: input must be float16, float32 or int32, got {x.dtype.name}")
    # The probability of keeping; the original's kernel (kernels/poprand/dropout_xla.cc) does
    # not check its range: beyond [0, 1] everything is kept or dropped.
    keep = _float_attr(rate, f"{what}: rate")
    scale = _float_attr(scale, f"{what}: scale")
    if seed is None:
        # The device's seed stream gives int64 seeds; the op's seed output is an int32 pair,
        # and the mask is the one that pair gives to ipu_dropout_with_seed.
        seed = tf.cast(rand_ops.device_seed(), tf.int32)
    else:
        seed = rand_ops.checked_seed(seed)
    mask_shape = rand_ops.dropout_mask_shape(x, list(noise_shape or []))
    return rand_ops.seeded_dropout(x, seed, mask_shape, 1.0 - keep, scale), tf.identity(seed)


def _float_attr(value, what: str) -> float:
    # A float attribute: TensorFlow converts it with float() (a str is a TypeError).
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} must be a float, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a float, got {value!r}") from None


def _reference() -> tf.Tensor:
    """A scalar variant (the original's output is an opaque reference of that type)."""
    return tf.raw_ops.EmptyTensorList(
        element_shape=tf.constant([], tf.int32), max_num_elements=0, element_dtype=tf.int32
    )


def _dropout_op(result_type, input, seed, rate, scale, noise_shape, name):  # noqa: A002
    """One of the dropout ops: `result_type` (named as the op) says which outputs it has."""
    op_type = result_type.__name__
    with tf.name_scope(name or op_type):
        output, used = _dropped(op_type, input, seed, rate, scale, noise_shape)
        if "reference" in result_type._fields:
            return result_type(output, used, _reference())
        return result_type(output, used)


def ipu_dropout(input, rate, scale, noise_shape=(), name=None) -> IpuDropout:  # noqa: A002
    return _dropout_op(IpuDropout, input, None, rate, scale, noise_shape, name)


def ipu_dropout_no_ref(input, rate, scale, noise_shape=(), name=None) -> IpuDropoutNoRef:  # noqa: A002
    return _dropout_op(IpuDropoutNoRef, input, None, rate, scale, noise_shape, name)


def ipu_dropout_with_seed(
    input,  # noqa: A002
    seed,
    rate,
    scale,
    noise_shape=(),
    name=None,
) -> IpuDropoutWithSeed:
    return _dropout_op(IpuDropoutWithSeed, input, seed, rate, scale, noise_shape, name)


def ipu_dropout_with_seed_no_ref(
    input,  # noqa: A002
    seed,
    rate,
    scale,
    noise_shape=(),
    name=None,
) -> IpuDropoutWithSeedNoRef:
    return _dropout_op(IpuDropoutWithSeedNoRef, input, seed, rate, scale, noise_shape, name)


def ipu_dropout_with_seed_and_reference(
    input,  # noqa: A002
    seed,
    reference,
    rate,
    scale,
    noise_shape=(),
    name=None,
) -> IpuDropoutWithSeedAndReference:
    """Dropout with `seed`; `reference` (an earlier dropout's) only fixes the tile layout."""
    if tf.convert_to_tensor(reference).dtype != tf.variant:
        raise TypeError(
            "ipu_dropout_with_seed_and_reference: reference must be the reference output of "
            f"a dropout (a variant), got {reference!r}"
        )
    return _dropout_op(IpuDropoutWithSeedAndReference, input, seed, rate, scale, noise_shape, name)
