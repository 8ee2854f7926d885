"""`tensorflow.compiler.plugin.poplar.ops.gen_pop_datastream_ops`: its host-embedding operations
(re-exports only)."""

from openipu._src.ops.host_embedding.datastream_ops import (
    ipu_device_embedding_lookup,
    ipu_device_embedding_notify,
    ipu_device_embedding_update_add,
    ipu_host_embedding_deregister,
    ipu_host_embedding_register,
)

__all__ = [
    "ipu_device_embedding_lookup",
    "ipu_device_embedding_notify",
    "ipu_device_embedding_update_add",
    "ipu_host_embedding_deregister",
    "ipu_host_embedding_register",
]
