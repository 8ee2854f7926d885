"""`tensorflow.python.ipu.sharding`: utility functions for sharding graphs."""

from openipu._src.compiler.sharding import (
    dependencies,
    enable_sharded_gradient_tape,
    get_shard_from_colocation,
    get_sharding,
    has_attr,
    propagate_sharding,
)

__all__ = [
    "dependencies",
    "enable_sharded_gradient_tape",
    "get_shard_from_colocation",
    "get_sharding",
    "has_attr",
    "propagate_sharding",
]
