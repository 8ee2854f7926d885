"""`tensorflow.python.ipu.ops.experimental.popfloat_cast_to_gfloat`: generic float casts."""

from openipu._src.ops.gfloat_cast import (
    GenericFloat,
    calc_gfloat_params,
    cast_gfloat_to_native,
    cast_native_to_gfloat,
    cast_to_gfloat16_param_size,
    cast_to_gfloat32_param_size,
)

__all__ = ["GenericFloat"]

_ALSO_PUBLIC = (
    calc_gfloat_params,
    cast_gfloat_to_native,
    cast_native_to_gfloat,
    cast_to_gfloat16_param_size,
    cast_to_gfloat32_param_size,
)
