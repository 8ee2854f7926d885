"""`tensorflow.compiler.plugin.poplar.ops.gen_ipu_ops`: its raw configuration operation
(re-exports only)."""

from openipu._src.ops.plugin_ops.ipu_ops import ipu_get_configuration

__all__ = ["ipu_get_configuration"]
