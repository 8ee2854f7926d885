"""`tensorflow.compiler.plugin.poplar.ops.gen_poprand_ops`: its raw dropout operations
(re-exports only)."""

from openipu._src.ops.plugin_ops.poprand_ops import (
    ipu_dropout,
    ipu_dropout_no_ref,
    ipu_dropout_with_seed,
    ipu_dropout_with_seed_and_reference,
    ipu_dropout_with_seed_no_ref,
)

__all__ = [
    "ipu_dropout",
    "ipu_dropout_no_ref",
    "ipu_dropout_with_seed",
    "ipu_dropout_with_seed_and_reference",
    "ipu_dropout_with_seed_no_ref",
]
