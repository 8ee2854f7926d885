"""`ipu.sharding`: utility functions for sharding graphs (spec section 21.17).

A shard is recorded on an op as the original's `_XlaSharding` attribute (an XLA
`OpSharding` proto of type MAXIMAL naming its IPUs), which `ipu.scopes.ipu_shard` sets;
these helpers read and propagate it as the original's tensorflow/python/ipu/sharding.py.
"""

from __future__ import annotations

from collections.abc import Iterable

import tensorflow as tf
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import ops

SHARDING_ATTR_NAME = "_XlaSharding"


def sharding_proto(indices: list[int]) -> bytes:
    """The `_XlaSharding` value for `indices` (the original's: MAXIMAL, every index listed)."""
    proto = xla_data_pb2.OpSharding(
        type=xla_data_pb2.OpSharding.MAXIMAL, tile_assignment_devices=indices
    )
    return proto.SerializeToString()


def has_attr(o: ops.Operation, attr_name: str) -> bool:
    """Whether operation `o` has the attribute `attr_name`."""
    return attr_name in o.node_def.attr


def get_sharding(op: ops.Operation) -> list[int] | None:
    """The shards of `op` (a list of IPU indices), or None if it has no sharding."""
    if not has_attr(op, SHARDING_ATTR_NAME):
        return None
    proto = xla_data_pb2.OpSharding()
    proto.ParseFromString(op.get_attr(SHARDING_ATTR_NAME))
    return list(proto.tile_assignment_devices)


def dependencies(roots: Iterable[ops.Operation | tf.Tensor]) -> set[ops.Operation]:
    """The operations `roots` depend on (through inputs and control inputs), roots included."""
    found: set[ops.Operation] = set()
    working = [root.op if isinstance(root, tf.Tensor) else root for root in roots]
    while working:
        op = working.pop()
        if op in found:
            continue
        found.add(op)
        working.extend(t.op for t in op.inputs if t.op not in found)
        working.extend(c for c in op.control_inputs if c not in found)
    return found


def get_shard_from_colocation(op: ops.Operation) -> bytes | None:
    """The `_XlaSharding` value of an op `op` is co-located with, else of an input's op.

    Returns the serialized attribute (as the original), or None if none is sharded.
    """
    graph = op.graph
    for group in op.colocation_groups():
        name = group.decode("utf-8").removeprefix("loc:@")
        try:
            colocated = graph.get_operation_by_name(name)
        except KeyError:
            continue
        if has_attr(colocated, SHARDING_ATTR_NAME):
            value: bytes = colocated.get_attr(SHARDING_ATTR_NAME)
            return value
    for tensor in op.inputs:
        if has_attr(tensor.op, SHARDING_ATTR_NAME):
            value = tensor.op.get_attr(SHARDING_ATTR_NAME)
            return value
    return None


def propagate_sharding(g: ops.Graph) -> None:
    """Gives co-located ops without sharding (backward ops) the sharding of their forward op."""
    changed = True
    while changed:
        changed = False
        for op in g.get_operations():
            if not has_attr(op, "_class") or has_attr(op, SHARDING_ATTR_NAME):
                continue
            value = get_shard_from_colocation(op)
            if value is not None:
                op._set_attr(SHARDING_ATTR_NAME, attr_value_pb2.AttrValue(s=value))  # noqa: SLF001
                changed = True


def enable_sharded_gradient_tape() -> None:
    """Backward ops that `tf.GradientTape` builds inherit the sharding of their forward op."""
    # Imported here: integration is the layer below, but its patch families are loaded
    # only by the code that applies them.
    from openipu._src.integration import sharded_gradient_tape

    sharded_gradient_tape.enable(_sharded_gradient_scope)


def _sharded_gradient_scope(shard_value: bytes):  # noqa: ANN202 - a context manager
    from openipu._src.compiler import scopes  # imported here: scopes imports this module

    proto = xla_data_pb2.OpSharding()
    proto.ParseFromString(shard_value)
    return scopes.ipu_shard(list(proto.tile_assignment_devices))
