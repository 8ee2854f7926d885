"""`tensorflow.python.ipu.scopes`: scoping contexts."""

from openipu._src.compiler.scopes import (
    frontend_attribute,
    ipu_jit_scope,
    ipu_scope,
    ipu_shard,
    outside_compilation_scope,
    partials_type,
    stochastic_rounding,
)

__all__ = [
    "frontend_attribute",
    "ipu_jit_scope",
    "ipu_scope",
    "ipu_shard",
    "outside_compilation_scope",
    "partials_type",
    "stochastic_rounding",
]
