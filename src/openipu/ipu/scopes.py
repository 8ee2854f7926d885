"""`tensorflow.python.ipu.scopes`: scoping contexts."""

from openipu._src.compiler.scopes import (
    FRONTEND_ATTRIBUTES_NAME,
    OUTSIDE_COMPILATION_NAME,
    frontend_attribute,
    ipu_jit_scope,
    ipu_scope,
    ipu_shard,
    outside_compilation_scope,
    partials_type,
    stochastic_rounding,
)

__all__ = [
    "FRONTEND_ATTRIBUTES_NAME",
    "OUTSIDE_COMPILATION_NAME",
    "frontend_attribute",
    "ipu_jit_scope",
    "ipu_scope",
    "ipu_shard",
    "outside_compilation_scope",
    "partials_type",
    "stochastic_rounding",
]
