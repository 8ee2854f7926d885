"""`ipu.distributed.host_collective_ops`: PopDist's collectives between instances, by tensor.

The original's low-level host collectives (tensorflow/python/ipu/distributed/
host_collective_ops.py, over its `popdist_*` ops): one tensor per instance, gathered
(stacked along a new first dimension), reduced with a `tf.distribute.ReduceOp`, or
broadcast from instance 0. In a function each collective is matched across instances
by the name of its tensor, so instances may run them in different orders; eagerly,
in call order. Tensors whose shapes or dtypes differ between instances are refused
with the original's `UnknownError` "Tensor layouts did not match on all instances".
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework import errors, ops

from openipu._src.distributed import host_collectives

# Per function graph, how many collectives each name has started: a tensor reduced
# twice in one function takes a second set of keys (its instances count alike).
_uses: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# TensorFlow's collectives between hosts take 32- and 64-bit integers, not narrower ones:
# these travel as int32 and come back to their type (the original takes all of them).
_WIDENED = (tf.int8, tf.int16, tf.uint8, tf.uint16)


def allgather(value, tensor_name: str | None = None) -> tf.Tensor:
    """`value` of every instance, stacked in instance order: [instances, *value.shape]."""
    value = tf.convert_to_tensor(value)
    with _matched_by_name(value, "PopDistAllGather", tensor_name):
        return _narrowed(host_collectives.allgather(tf.expand_dims(_widened(value), 0)), value)


def allreduce(value, reduce_op, tensor_name: str | None = None) -> tf.Tensor:
    """The sum or mean (`reduce_op`, a `tf.distribute.ReduceOp`) of `value` over instances."""
    # As the original (distributed/host_collective_ops.py:42): `reduce_op.value` goes to a
    # string attr (AttributeError without `.value`, `_MakeStr`'s TypeError for a non-string),
    # and the kernel averages for "MEAN" and sums otherwise (kernels/popdist/all_reduce.cc).
    op_name = reduce_op.value
    if isinstance(op_name, bytes):
        op_name = op_name.decode("utf-8", "replace")
    if not isinstance(op_name, str):
        raise TypeError(f"Expected string for argument 'reduce_op' not {op_name!r}.")
    op = host_collectives.Average if op_name == "MEAN" else host_collectives.Sum
    value = tf.convert_to_tensor(value)
    with _matched_by_name(value, "PopDistAllReduce", tensor_name):
        return _narrowed(host_collectives.allreduce(_widened(value), op), value)


def broadcast(value, root_rank: int = 0, tensor_name: str | None = None) -> tf.Tensor:
    """Instance 0's `value`, on every instance: as the original, `root_rank` is accepted and
    not used (its kernel broadcasts from rank 0: kernels/popdist/broadcast.cc)."""
    del root_rank
    value = tf.convert_to_tensor(value)
    with _matched_by_name(value, "PopDistBroadcast", tensor_name):
        return _narrowed(host_collectives.broadcast(_widened(value), 0), value)


def _widened(value: tf.Tensor) -> tf.Tensor:
    return tf.cast(value, tf.int32) if value.dtype in _WIDENED else value


def _narrowed(result: tf.Tensor, value: tf.Tensor) -> tf.Tensor:
    return tf.cast(result, value.dtype) if value.dtype in _WIDENED else result


@contextlib.contextmanager
def _matched_by_name(value: tf.Tensor, kind: str, tensor_name: str | None) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        if not context.executing_eagerly():
            name = f"{kind}_" + (tensor_name or re.sub("[^a-zA-Z0-9_]", "_", value.name))
            counts = _uses.setdefault(ops.get_default_graph(), {})
            counts[name] = counts.get(name, 0) + 1
            stack.enter_context(host_collectives.keys_named(f"{name}_{counts[name]}"))
        try:
            with host_collectives.popdist_layout_errors():
                yield
        except host_collectives.LayoutMismatchError as error:
            raise errors.UnknownError(
                None, None, f"Tensor layouts did not match on all instances: {error}"
            ) from None
