"""`ipu.ops.experimental.popfloat_cast_to_gfloat`: casts to and from generic float formats.

The numerics are in `gfloat.py`. The format names, storage and native types follow the
original's `GenericFloat.set_param` (tensorflow/python/ipu/ops/experimental/
popfloat_cast_to_gfloat.py). The parameter vector is openipu's own: its first five
entries are the mantissa bits, exponent bits, bias, denormals and Inf enabled (Poplar's
vector holds masks for its vertices, which programs pass along but do not read).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from openipu._src.ops import gfloat

cast_to_gfloat16_param_size = 29
cast_to_gfloat32_param_size = 29


def _params_vector(fmt: gfloat.GfloatFormat, size: int) -> np.ndarray:
    params = np.zeros([size], np.int32)
    params[:5] = [fmt.mantissa_bits, fmt.exponent_bits, fmt.bias, fmt.denormals, fmt.infinities]
    return params


def _format_of_params(params: Any) -> gfloat.GfloatFormat:
    value = tf.get_static_value(params)
    if value is None:
        raise ValueError(
            "params must be known when the graph is built (the result of calc_gfloat_params or "
            "GenericFloat.get_cast_to_gfloat_params)"
        )
    value = np.asarray(value).reshape([-1])
    if value.size < 5:
        raise ValueError(f"params has {value.size} entries; a gfloat parameter vector has 29")
    man, exp, bias, denorm, inf = (int(v) for v in value[:5])
    return gfloat.GfloatFormat(man, exp, bias, bool(denorm), bool(inf) and exp > 0)


def _storage_dtype(storage_type: str, auto: tf.DType) -> tf.DType:
    if storage_type == "auto":
        return auto
    if storage_type == "fp32":
        return tf.float32
    if storage_type == "fp16":
        return tf.float16
    raise RuntimeError("Gfloat storage format not supported")


def _cast(
    inputs: Any,
    fmt: gfloat.GfloatFormat,
    en_nanoo: bool,
    round_mode: str,
    sr: gfloat.StochasticRounding,
    out_type: tf.DType,
) -> tf.Tensor:
    gfloat.check_round_mode(round_mode, sr.density)
    inputs = tf.convert_to_tensor(inputs)
    if inputs.dtype not in (tf.float16, tf.float32):
        raise TypeError(f"inputs must be float16 or float32, not {inputs.dtype.name}")
    values = gfloat.quantise(inputs, fmt, round_mode, en_nanoo, sr)
    if out_type in (tf.int8, tf.int16):
        return gfloat.pack(values, fmt, out_type)
    return tf.cast(values, out_type)


class GenericFloat:
    """A generic float format: casts native tensors to it and packed ones back."""

    def __init__(
        self,
        man: int = 10,
        exp: int = 5,
        bias: int = 15,
        en_denorm: bool = True,
        en_inf: bool = True,
        calc_type: str = "auto",
        name: str | None = None,
    ) -> None:
        self._man = man
        self._exp = exp
        self._bias = bias
        self._en_denorm = en_denorm
        self._en_inf = en_inf and exp > 0
        self._gfloat_calc_spec_dtype = calc_type
        self._name = name
        self._is_set: bool | None = None
        self._gfloat_as_int: bool | None = None
        self.set_param()

    @property
    def _gfloat_format(self) -> gfloat.GfloatFormat:
        return gfloat.GfloatFormat(self._man, self._exp, self._bias, self._en_denorm, self._en_inf)

    def set_param(self) -> None:
        if self._is_set is not None:
            return
        self._is_set = True
        self._gfloat_as_int = None
        man, exp, packed_bits = self._man, self._exp, self._man + self._exp
        params_struct = int(self._en_denorm) | (int(self._en_inf) << 1)
        self._gfloat_packed_params = man | (exp << 8) | ((self._bias & 255) << 16)
        self._gfloat_packed_params |= params_struct << 24
        spec = self._gfloat_calc_spec_dtype
        if exp > 5 or man > 10 or (exp == 5 and man == 10):
            # Wider than half in some field: computed in float32.
            self._format = "quantisedFp32"
            self._gfloat_storage_dtype = tf.float32
            ieee_half = exp == 5 and man == 10
            self._gfloat_native_dtype = tf.float16 if ieee_half and self._en_inf else tf.float32
            if ieee_half:
                self._gfloat_storage_dtype = tf.float16
                self._format = "ieeeFp16"
            elif packed_bits < 8:
                self._gfloat_storage_dtype = tf.int8
                self._format = "enDenormGf16"
                self._gfloat_as_int = True
            elif packed_bits < 16:
                self._gfloat_storage_dtype = tf.int16
                self._gfloat_native_dtype = tf.float32
                self._gfloat_as_int = True
                if exp == 8:
                    self._format = "bfloat16"
                else:
                    self._format = "enDenormGf16" if self._en_denorm else "noDenormGf16"
            if spec == "fp16":
                raise RuntimeError("Gfloat format cannot be generated using IEEE FP16")
            if spec not in ("auto", "fp32"):
                raise RuntimeError("Gfloat calculation type not supported")
            self._gfloat_calc_dtype = tf.float32
        else:
            self._format = "quantisedFp16"
            if exp == 5 and not self._en_inf:
                self._format = "maxNormAlignGf8"
            self._gfloat_storage_dtype = tf.float16
            self._gfloat_native_dtype = tf.float16
            if packed_bits < 8:
                self._gfloat_as_int = True
                self._gfloat_storage_dtype = tf.int8
                if exp == 5:
                    self._format = "oneFiveTwoGf8" if self._en_inf else "maxNormAlignGf8"
                else:
                    self._format = "minNormAlignGf8"
            if spec not in ("auto", "fp16", "fp32"):
                raise RuntimeError("Gfloat calculation type not supported")
            self._gfloat_calc_dtype = tf.float32 if spec == "fp32" else tf.float16
        self._cast_param_size = GenericFloat.get_gfloat_param_size(self._gfloat_calc_dtype)
        self._cast_to_gfloat_params = _params_vector(self._gfloat_format, self._cast_param_size)

    def reset(self) -> None:
        self._is_set = None
        self.set_param()

    def cast_native_to_gfloat(
        self,
        inputs: Any,
        en_nanoo: bool = True,
        round_mode: str = "RN",
        sr_density: str = "Invalid",
        sr_bits: int = 23,
        sr_norm_offset: float = 0.0,
        sr_norm_scale: float = 1.0,
        sr_norm_min: float = -0.5,
        sr_norm_max: float = 0.5,
        sr_prob: float = 1.0,
        storage_type: str = "auto",
    ) -> tf.Tensor:
        """Rounds `inputs` (float16/float32) to the format, stored as `storage_type`."""
        if en_nanoo and not self._en_inf:
            # The original raises this warning class (popfloat_cast_to_gfloat.py).
            raise RuntimeWarning(
                "Gfloat format's Infs and Nans are not enabled. Input Nans and Infs will be set "
                "to 0. The quantization will clip on-overflow"
            )
        if self._is_set is None:
            raise RuntimeError("Cast object properties were modified and object was not reset")
        out_type = _storage_dtype(storage_type, self._gfloat_storage_dtype)
        sr = gfloat.StochasticRounding(
            sr_density, sr_bits, sr_norm_offset, sr_norm_scale, sr_norm_min, sr_norm_max, sr_prob
        )
        return _cast(inputs, self._gfloat_format, en_nanoo, round_mode, sr, out_type)

    def cast_gfloat_to_native(self, inputs: Any, storage_type: str = "auto") -> Any:
        """Unpacks int8/int16 gfloat tensors; other (native) storage is returned as it is."""
        if not self._is_set:
            raise RuntimeError("Gfloat parameters are not set. Try to reset parameters")
        if not self._gfloat_as_int:
            return inputs
        out_type = _storage_dtype(storage_type, self._gfloat_native_dtype)
        return tf.cast(gfloat.unpack(tf.convert_to_tensor(inputs), self._gfloat_format), out_type)

    def get_cast_native_to_gfloat_fun(
        self,
        en_nanoo: bool = True,
        round_mode: str = "RN",
        sr_bits: int = 23,
        sr_density: str = "Invalid",
        sr_norm_offset: float = 0.0,
        sr_norm_scale: float = 1.0,
        sr_norm_min: float = -0.5,
        sr_norm_max: float = 0.5,
        sr_prob: float = 1.0,
        storage_type: str = "auto",
    ) -> Callable[[Any], tf.Tensor]:
        return lambda x: self.cast_native_to_gfloat(
            x,
            en_nanoo=en_nanoo,
            round_mode=round_mode,
            sr_bits=sr_bits,
            sr_density=sr_density,
            sr_norm_offset=sr_norm_offset,
            sr_norm_scale=sr_norm_scale,
            sr_norm_min=sr_norm_min,
            sr_norm_max=sr_norm_max,
            sr_prob=sr_prob,
            storage_type=storage_type,
        )

    def get_cast_gfloat_to_native_fun(self, storage_type: str = "auto") -> Callable[[Any], Any]:
        return lambda x: self.cast_gfloat_to_native(x, storage_type=storage_type)

    def get_gfloat_storage_dtype(self) -> tf.DType:
        return self._gfloat_storage_dtype

    def get_gfloat_calc_dtype(self) -> tf.DType:
        return self._gfloat_calc_dtype

    def get_gfloat_native_dtype(self) -> tf.DType:
        return self._gfloat_native_dtype

    def get_cast_to_gfloat_params(self) -> np.ndarray:
        return self._cast_to_gfloat_params

    def get_gfloat_cast_param_size(self) -> int:
        return self._cast_param_size

    def get_gfloat_packed_params(self) -> int:
        return self._gfloat_packed_params

    def get_mantissa_size(self) -> int:
        return self._man

    def get_exponent_size(self) -> int:
        return self._exp

    def get_exponent_bias(self) -> int:
        return self._bias

    def get_en_denorms(self) -> bool:
        return self._en_denorm

    def get_en_inf(self) -> bool:
        return self._en_inf

    def is_packed_float(self) -> bool | None:
        return self._gfloat_as_int

    @staticmethod
    def get_gfloat_param_size(calc_type: tf.DType) -> int:
        if calc_type == tf.float32:
            return cast_to_gfloat32_param_size
        if calc_type == tf.float16:
            return cast_to_gfloat16_param_size
        raise RuntimeError("Gfloat format calculation type not supported")


def cast_native_to_gfloat(
    inputs: Any,
    params: Any,
    en_nanoo: bool = True,
    round_mode: str = "RN",
    sr_bits: int = 23,
    sr_density: str = "Invalid",
    sr_norm_offset: float = 0.0,
    sr_norm_scale: float = 1.0,
    sr_norm_min: float = -0.5,
    sr_norm_max: float = 0.5,
    sr_prob: float = 1.0,
    gfloat_format: str = "Invalid",
    calc_type: tf.DType = tf.float32,
    out_type: tf.DType = tf.float32,
) -> tf.Tensor:
    """Rounds `inputs` to the format described by `params` (from `calc_gfloat_params`)."""
    del gfloat_format, calc_type  # the numerics follow from params alone
    sr = gfloat.StochasticRounding(
        sr_density, sr_bits, sr_norm_offset, sr_norm_scale, sr_norm_min, sr_norm_max, sr_prob
    )
    fmt = _format_of_params(params)
    return _cast(inputs, fmt, en_nanoo and fmt.infinities, round_mode, sr, tf.as_dtype(out_type))


def cast_gfloat_to_native(
    inputs: Any,
    params: Any,
    gfloat_format: str = "Invalid",
    calc_type: tf.DType = tf.float32,
    out_type: tf.DType = tf.float32,
) -> tf.Tensor:
    """Unpacks an int8/int16 gfloat tensor of the format described by `params`."""
    del gfloat_format, calc_type
    inputs = tf.convert_to_tensor(inputs)
    if inputs.dtype not in (tf.int8, tf.int16):
        raise TypeError(f"inputs must be int8 or int16 (packed gfloats), not {inputs.dtype.name}")
    return tf.cast(gfloat.unpack(inputs, _format_of_params(params)), tf.as_dtype(out_type))


def calc_gfloat_params(
    man: int = 10,
    exp: int = 5,
    bias: int = 15,
    en_denorm: bool = True,
    en_inf: bool = True,
    calc_type: tf.DType = tf.float32,
) -> tf.Tensor:
    """The int32 parameter vector of a format, for the module-level casts."""
    size = GenericFloat.get_gfloat_param_size(calc_type)
    fmt = gfloat.GfloatFormat(man, exp, bias, en_denorm, en_inf and exp > 0)
    return tf.constant(_params_vector(fmt, size))
