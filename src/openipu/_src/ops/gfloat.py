"""Generic floats ("gfloat", Poplar's popfloat library), emulated with TensorFlow ops.

A gfloat format has a sign bit, `exponent_bits` exponent bits with an exponent
`bias`, and `mantissa_bits` mantissa bits; denormals and one exponent value for
Inf/NaN may each be enabled. A cast to the format rounds each value to the
nearest representable one in the chosen mode and stores it in a native float
(the values are exact there) or, for formats of at most 15 bits besides the sign
whose mantissa or exponent exceed half precision's, packed into int8/int16.

Packed layout (openipu's; Poplar's is internal to its vertices): the sign in the
top bit, then the biased exponent, then the mantissa, left aligned, so that
(8, 7, bias 127) is bfloat16's layout and (5, 2, bias 15, Inf enabled) is the top
byte of an IEEE half. The exponent field 0 holds zero and the denormals; with
Inf enabled the all-ones field holds Inf (mantissa 0) and NaN.

Overflow (the rounded value beyond the largest finite one): NaN with `en_nanoo`
(allowed only with Inf enabled, tensorflow/python/ipu/ops/experimental/
popfloat_cast_to_gfloat.py), else the largest finite value of its sign. Without
Inf enabled, input Infs and NaNs become 0 (the original's warning says so).

Computations are in float64, where every gfloat value of a float16/float32 input
and every quantum is exact, so deterministic rounding is exact.
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf

#: Rounding modes (the original's gfloat_config_utils.proto `FPConfig.RoundMode`).
ROUND_MODES = ("RZ", "RA", "RN", "RD", "RU", "SR")
#: Noise densities of stochastic rounding (`SRConfig.Density`); "Invalid" is the default, uniform.
SR_DENSITIES = (
    "Invalid",
    "Uniform",
    "Normal",
    "TruncatedNormal",
    "Laplace",
    "TruncatedLaplace",
    "Logistic",
    "TruncatedLogistic",
    "LogitNormal",
    "TruncatedLogitNormal",
    "Bernoulli",
)


@dataclasses.dataclass(frozen=True)
class GfloatFormat:
    """The numeric definition of one gfloat format."""

    mantissa_bits: int
    exponent_bits: int
    bias: int
    denormals: bool
    infinities: bool

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias

    @property
    def max_exponent(self) -> int:
        """The exponent of the largest finite value (the all-ones field is Inf/NaN if enabled)."""
        top_field = (1 << self.exponent_bits) - 1 - (1 if self.infinities else 0)
        return top_field - self.bias

    @property
    def largest(self) -> float:
        return math.ldexp(2.0 - math.ldexp(1.0, -self.mantissa_bits), self.max_exponent)


@dataclasses.dataclass(frozen=True)
class StochasticRounding:
    """The noise of the `SR` rounding mode (the cast op's `sr_*` arguments)."""

    density: str = "Invalid"
    bits: int = 23
    offset: float = 0.0
    scale: float = 1.0
    minimum: float = -0.5
    maximum: float = 0.5
    probability: float = 1.0


def _full(like: tf.Tensor, value: float) -> tf.Tensor:
    """`value` in the shape and dtype of `like` (tf.where does not convert Python numbers)."""
    return tf.fill(tf.shape(like), tf.constant(value, like.dtype))


def _power_of_two(exponent: tf.Tensor) -> tf.Tensor:
    """2**exponent (int64, within float64's normal range) as float64, exactly, from its bits."""
    return tf.bitcast(tf.bitwise.left_shift(exponent + 1023, 52), tf.float64)


def _exponent_of(values: tf.Tensor) -> tf.Tensor:
    """floor(log2(|values|)) of nonzero finite float64 values converted from float32/16, int64."""
    bits = tf.bitcast(values, tf.int64)
    return tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, 52), 0x7FF) - 1023


def _quantile_noise(shape: tf.Tensor, sr: StochasticRounding) -> tf.Tensor:
    """Noise of a continuous density, sampled by inverting its CDF (truncated ones exactly)."""
    family = sr.density.removeprefix("Truncated")
    mu, s = sr.offset, sr.scale

    def cdf(x: float) -> float:
        z = (x - mu) / s
        if family == "Normal":
            return 0.5 * math.erfc(-z / math.sqrt(2.0))
        if family == "Laplace":
            return 0.5 * math.exp(z) if z < 0 else 1.0 - 0.5 * math.exp(-z)
        if family == "Logistic":
            return 1.0 / (1.0 + math.exp(-z))
        # LogitNormal: the logistic function of a normal variable, within (0, 1).
        if x <= 0.0:
            return 0.0
        if x >= 1.0:
            return 1.0
        return 0.5 * math.erfc(-(math.log(x / (1.0 - x)) - mu) / s / math.sqrt(2.0))

    low, high = (cdf(sr.minimum), cdf(sr.maximum)) if sr.density != family else (0.0, 1.0)
    tiny = 1e-12
    u = tf.random.uniform(shape, max(low, tiny), min(high, 1.0 - tiny), dtype=tf.float64)
    if family in ("Normal", "LogitNormal"):
        noise = mu + s * tf.math.ndtri(u)
        if family == "LogitNormal":
            noise = tf.sigmoid(noise)
    elif family == "Laplace":
        centred = u - 0.5
        noise = mu - s * tf.sign(centred) * tf.math.log1p(-2.0 * tf.abs(centred))
    else:
        noise = mu + s * tf.math.log(u / (1.0 - u))
    return tf.clip_by_value(noise, sr.minimum, sr.maximum)


def _stochastic_round(magnitude: tf.Tensor, sr: StochasticRounding) -> tf.Tensor:
    """Rounds nonnegative multiples-of-quanta `magnitude` up or down at random."""
    shape = tf.shape(magnitude)
    down = tf.floor(magnitude)
    if sr.density == "Bernoulli":
        # sr_prob: the probability of truncating (the original's cast_native_to_gfloat docstring).
        keep = tf.random.uniform(shape, dtype=tf.float64) < sr.probability
        return tf.where(keep | tf.equal(down, magnitude), down, down + 1.0)
    if sr.density in ("Invalid", "Uniform"):
        # Uniform noise in [0, 1) with `bits` bits of resolution.
        resolution = float(1 << max(0, min(sr.bits, 52)))
        raw = tf.random.uniform(shape, dtype=tf.float64)
        noise = tf.floor(raw * resolution) / resolution
        if sr.density == "Uniform":
            noise = sr.minimum + 0.5 + (sr.maximum - sr.minimum) * (noise - 0.5)
        return tf.floor(magnitude + noise)
    return tf.floor(magnitude + 0.5 + _quantile_noise(shape, sr))


def _round(scaled: tf.Tensor, mode: str, sr: StochasticRounding) -> tf.Tensor:
    if mode == "RZ":
        return tf.sign(scaled) * tf.floor(tf.abs(scaled))
    if mode == "RN":
        return tf.round(scaled)  # ties to even
    if mode == "RA":
        return tf.sign(scaled) * tf.floor(tf.abs(scaled) + 0.5)
    if mode == "RU":
        return tf.math.ceil(scaled)
    if mode == "RD":
        return tf.floor(scaled)
    return tf.sign(scaled) * _stochastic_round(tf.abs(scaled), sr)


def check_round_mode(round_mode: str, sr_density: str) -> None:
    # The original's kernel parses the name into FPConfig.RoundMode (kernels/popfloat/
    # cast_to_gfloat.cc) without checking the parse, leaving an invalid mode for popfloat's
    # cast, which has no rounding for it; a clear error here instead of an undefined cast.
    if round_mode not in ROUND_MODES:
        raise ValueError(f"round_mode {round_mode!r} is not one of {', '.join(ROUND_MODES)}")
    # An unknown density is only read by the SR mode: the other modes ignore it.
    if round_mode == "SR" and sr_density not in SR_DENSITIES:
        raise ValueError(f"sr_density {sr_density!r} is not one of {', '.join(SR_DENSITIES)}")


def quantise(
    values: tf.Tensor,
    fmt: GfloatFormat,
    round_mode: str = "RN",
    nan_on_overflow: bool = False,
    sr: StochasticRounding = StochasticRounding(),
) -> tf.Tensor:
    """The float64 gfloat values of float16/float32 `values` rounded to `fmt`."""
    x = tf.cast(values, tf.float64)
    finite = tf.math.is_finite(x)
    safe = tf.where(finite, x, tf.zeros_like(x))
    min_normal = math.ldexp(1.0, fmt.min_normal_exponent)
    exponent = tf.maximum(
        _exponent_of(tf.where(tf.equal(safe, 0.0), tf.ones_like(safe), safe)), -1022
    )
    exponent = tf.maximum(exponent, fmt.min_normal_exponent)
    quantum_exponent = exponent - fmt.mantissa_bits
    if not fmt.denormals:
        # Below the smallest normal only 0 and +-min_normal exist: round on that grid.
        below = tf.abs(safe) < min_normal
        quantum_exponent = tf.where(
            below, _full(quantum_exponent, fmt.min_normal_exponent), quantum_exponent
        )
    quantum = _power_of_two(quantum_exponent)
    rounded = _round(safe / quantum, round_mode, sr) * quantum

    largest = fmt.largest
    # Modes that round toward zero on a value's side never overflow: they stop at the largest.
    toward_zero = {"RZ": tf.ones_like(x, tf.bool), "RD": x > 0, "RU": x < 0}.get(round_mode)
    overflow = tf.abs(rounded) > largest
    clamped = tf.clip_by_value(rounded, -largest, largest)
    if nan_on_overflow and fmt.infinities:
        overflow_to_nan = overflow if toward_zero is None else overflow & ~toward_zero
        rounded = tf.where(overflow_to_nan, _full(clamped, math.nan), clamped)
    else:
        rounded = clamped
    special = x if fmt.infinities else tf.zeros_like(x)
    return tf.where(finite, rounded, special)


def _field_widths(fmt: GfloatFormat, storage: tf.DType) -> tuple[int, int]:
    width = 8 if storage == tf.int8 else 16
    return width, width - 1 - fmt.exponent_bits - fmt.mantissa_bits


def pack(values: tf.Tensor, fmt: GfloatFormat, storage: tf.DType) -> tf.Tensor:
    """float64 gfloat `values` of `fmt` as their bit patterns in int8/int16 (layout: module doc)."""
    width, padding = _field_widths(fmt, storage)
    magnitude = tf.abs(values)
    is_nan = tf.math.is_nan(values)
    is_inf = tf.math.is_inf(values)
    finite = tf.math.is_finite(values)
    safe = tf.where(finite, magnitude, tf.zeros_like(magnitude))
    normal = safe >= math.ldexp(1.0, fmt.min_normal_exponent)
    exponent = _exponent_of(tf.where(normal, safe, tf.ones_like(safe)))
    field = tf.where(normal, exponent + fmt.bias, tf.zeros_like(exponent))
    quantum_exponent = tf.where(normal, exponent, _full(exponent, fmt.min_normal_exponent))
    quantum_exponent -= fmt.mantissa_bits
    significand = tf.cast(safe / _power_of_two(quantum_exponent), tf.int64)
    mantissa = tf.where(normal, significand - (1 << fmt.mantissa_bits), significand)
    all_ones = (1 << fmt.exponent_bits) - 1
    field = tf.where(finite, field, _full(field, all_ones))
    nan_mantissa = 1 << max(fmt.mantissa_bits - 1, 0)
    mantissa = tf.where(is_inf, tf.zeros_like(mantissa), mantissa)
    mantissa = tf.where(is_nan, _full(mantissa, nan_mantissa), mantissa)
    bits = tf.bitwise.bitwise_or(tf.bitwise.left_shift(field, fmt.mantissa_bits), mantissa)
    negative = tf.bitcast(values, tf.int64) < 0  # the sign bit: negative zero keeps it
    bits = tf.where(negative, tf.bitwise.bitwise_or(bits, 1 << (width - 1 - padding)), bits)
    bits = tf.bitwise.left_shift(bits, padding)
    # Two's complement of the storage width, then the signed storage type.
    bits = tf.where(bits >= (1 << (width - 1)), bits - (1 << width), bits)
    return tf.cast(bits, storage)


def unpack(bits: tf.Tensor, fmt: GfloatFormat) -> tf.Tensor:
    """The float64 values of int8/int16 gfloat bit patterns of `fmt`."""
    width, padding = _field_widths(fmt, bits.dtype)
    raw = tf.bitwise.bitwise_and(tf.cast(bits, tf.int64), (1 << width) - 1)
    raw = tf.bitwise.right_shift(raw, padding)
    mantissa = tf.bitwise.bitwise_and(raw, (1 << fmt.mantissa_bits) - 1)
    field = tf.bitwise.bitwise_and(
        tf.bitwise.right_shift(raw, fmt.mantissa_bits), (1 << fmt.exponent_bits) - 1
    )
    negative = tf.not_equal(
        tf.bitwise.bitwise_and(raw, 1 << (fmt.exponent_bits + fmt.mantissa_bits)), 0
    )
    normal = field > 0
    significand = tf.where(normal, mantissa + (1 << fmt.mantissa_bits), mantissa)
    exponent = tf.where(normal, field - fmt.bias, _full(field, fmt.min_normal_exponent))
    exponent -= fmt.mantissa_bits
    magnitude = tf.cast(significand, tf.float64) * _power_of_two(exponent)
    if fmt.infinities:
        special = tf.equal(field, (1 << fmt.exponent_bits) - 1)
        inf_or_nan = tf.where(
            tf.equal(mantissa, 0), _full(magnitude, math.inf), _full(magnitude, math.nan)
        )
        magnitude = tf.where(special, inf_or_nan, magnitude)
    return tf.where(negative, -magnitude, magnitude)
