"""`ipu.ops.experimental.popfloat_cast_to_gfloat`: gfloat casts against numpy/ml_dtypes references."""

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ipu.ops.experimental import popfloat_cast_to_gfloat as gf

RNG = np.random.default_rng(7)


def _values(n, low_exp, high_exp):
    """Random float32 values across binades, of both signs, with zeros."""
    x = RNG.standard_normal(n) * np.exp2(RNG.integers(low_exp, high_exp, n))
    x[:4] = 0.0
    return x.astype(np.float32)


def _bf16_bits(x, mode):
    """float32 -> bfloat16 bit patterns by bit manipulation, int16."""
    bits = x.view(np.uint32).astype(np.uint64)
    top, rest = bits >> 16, bits & 0xFFFF
    if mode == "RN":
        top = (bits + 0x7FFF + (top & 1)) >> 16
    elif mode in ("RU", "RD"):
        negative = (bits >> 31) == 1
        away = negative if mode == "RD" else ~negative
        top = np.where(away & (rest != 0), top + 1, top)
    return top.astype(np.uint16).view(np.int16)


def test_ieee_half_format_matches_numpy_float16():
    x = _values(2000, -26, 15)
    half = gf.GenericFloat(man=10, exp=5, bias=15)
    out = half.cast_native_to_gfloat(x)
    assert out.dtype == tf.float16
    np.testing.assert_array_equal(out.numpy(), x.astype(np.float16))
    assert half.cast_gfloat_to_native(out) is out  # native storage: nothing to unpack


@pytest.mark.parametrize("mode", ["RZ", "RN", "RU", "RD"])
def test_bfloat16_format_packs_bfloat16_bits(mode):
    x = _values(1000, -30, 30)
    bf16 = gf.GenericFloat(man=7, exp=8, bias=127)
    packed = bf16.cast_native_to_gfloat(x, round_mode=mode)
    assert packed.dtype == tf.int16 and bf16.is_packed_float()
    expected = _bf16_bits(x, mode)
    np.testing.assert_array_equal(packed.numpy(), expected)
    native = bf16.cast_gfloat_to_native(packed).numpy()
    np.testing.assert_array_equal(
        native, (expected.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    )
    if mode == "RN":
        np.testing.assert_array_equal(native, x.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_one_five_two_format_is_ieee_float8_e5m2():
    x = _values(1000, -18, 15)
    x = x[np.abs(x) < 57344]  # the largest e5m2 value: overflow differs (NaN on overflow here)
    f8 = gf.GenericFloat(man=2, exp=5, bias=15)
    packed = f8.cast_native_to_gfloat(x)
    assert packed.dtype == tf.int8
    reference = x.astype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(packed.numpy(), reference.view(np.int8))
    unpacked = f8.cast_gfloat_to_native(packed)
    assert unpacked.dtype == tf.float16
    np.testing.assert_array_equal(unpacked.numpy(), reference.astype(np.float16))


def test_round_half_away_and_ties_to_even():
    # quantum 2**-2 for (man=2, exp=5): 1.125 is halfway between 1.0 and 1.25.
    x = np.array([1.125, 1.375, -1.125, -1.375], np.float32)
    fmt = gf.GenericFloat(man=2, exp=5, bias=15)

    def native(mode):
        return fmt.cast_gfloat_to_native(fmt.cast_native_to_gfloat(x, round_mode=mode))

    np.testing.assert_array_equal(native("RN").numpy(), [1.0, 1.5, -1.0, -1.5])
    np.testing.assert_array_equal(native("RA").numpy(), [1.25, 1.5, -1.25, -1.5])
    np.testing.assert_array_equal(native("RZ").numpy(), [1.0, 1.25, -1.0, -1.25])


def test_denormals_disabled_flush_to_zero_or_the_smallest_normal():
    # (man=3, exp=4, bias=7) stored in half: smallest normal 2**-6, denormal quantum 2**-9.
    x = np.array([2.0**-6, 0.75 * 2.0**-6, 0.25 * 2.0**-6, 3 * 2.0**-9], np.float32)
    with_denorms = gf.GenericFloat(man=3, exp=4, bias=7, en_denorm=True, en_inf=False)
    no_denorms = gf.GenericFloat(man=3, exp=4, bias=7, en_denorm=False, en_inf=False)

    def unpack(g):
        return g.cast_gfloat_to_native(g.cast_native_to_gfloat(x, en_nanoo=False)).numpy()

    np.testing.assert_array_equal(
        unpack(with_denorms), [2.0**-6, 0.75 * 2.0**-6, 0.25 * 2.0**-6, 3 * 2.0**-9]
    )
    np.testing.assert_array_equal(unpack(no_denorms), [2.0**-6, 2.0**-6, 0.0, 0.0])


def test_overflow_nan_or_clip_and_specials_without_inf():
    x = np.array([1e6, -1e6, np.inf, np.nan, 3.0], np.float32)
    with_inf = gf.GenericFloat(man=10, exp=5, bias=15)
    out = with_inf.cast_native_to_gfloat(x).numpy()
    assert np.isnan(out[:2]).all() and out[2] == np.inf and np.isnan(out[3]) and out[4] == 3.0
    clipped = with_inf.cast_native_to_gfloat(x, en_nanoo=False).numpy()
    np.testing.assert_array_equal(clipped[:2], [65504.0, -65504.0])
    # Without Inf the all-ones exponent holds numbers: largest (2 - 2**-3) * 2**(15 - 7).
    no_inf = gf.GenericFloat(man=3, exp=4, bias=7, en_inf=False)
    with pytest.raises(RuntimeWarning, match="Infs and Nans are not enabled"):
        no_inf.cast_native_to_gfloat(x)
    out = no_inf.cast_gfloat_to_native(no_inf.cast_native_to_gfloat(x, en_nanoo=False)).numpy()
    np.testing.assert_array_equal(out, [480.0, -480.0, 0.0, 0.0, 3.0])


def test_stochastic_rounding_is_unbiased_and_seeded():
    value = 1.0 + 2.0**-12  # a quarter of half's quantum above 1.0
    half = gf.GenericFloat(man=10, exp=5, bias=15)
    tf.random.set_seed(3)
    first = half.cast_native_to_gfloat(tf.fill([20000], value), round_mode="SR").numpy()
    assert set(np.unique(first)) == {np.float16(1.0), np.float16(1.0 + 2.0**-10)}
    assert abs(first.astype(np.float64).mean() - value) < 2.0**-15
    tf.random.set_seed(3)
    again = half.cast_native_to_gfloat(tf.fill([20000], value), round_mode="SR").numpy()
    np.testing.assert_array_equal(first, again)


def test_module_functions_take_the_parameter_vector():
    params = gf.calc_gfloat_params(man=7, exp=8, bias=127, calc_type=tf.float32)
    x = _values(100, -10, 10)
    packed = gf.cast_native_to_gfloat(x, params, out_type=tf.int16, gfloat_format="bfloat16")
    np.testing.assert_array_equal(packed.numpy(), _bf16_bits(x, "RN"))
    back = gf.cast_gfloat_to_native(packed, params, out_type=tf.float32)
    np.testing.assert_array_equal(back.numpy(), x.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_in_a_compiled_function_and_bad_round_mode():
    half = gf.GenericFloat(man=5, exp=5, bias=15)
    fn = tf.function(half.get_cast_native_to_gfloat_fun(round_mode="RZ"), jit_compile=True)
    x = np.array([1.0 + 2.0**-5 + 2.0**-7], np.float32)
    np.testing.assert_array_equal(fn(x).numpy(), np.float16(1.0 + 2.0**-5))
    with pytest.raises(ValueError, match="round_mode 'XX'"):
        half.cast_native_to_gfloat(x, round_mode="XX")


def test_reachable_from_the_ipu_package_as_in_the_original():
    from tensorflow.python import ipu

    assert ipu.popfloat_cast_to_gfloat is gf
    assert ipu.popfloat_cast_to_gfloat.GenericFloat is gf.GenericFloat
