"""`ipu.distributed.allreduce`, `allgather` and `broadcast`: collectives between instances.

Graphcore's versions ran on Horovod, whose ranks are processes: these reduce
one tensor per instance (not per replica), with TensorFlow's collective ops
between the instances' host devices. Without other instances they return
their input (a world of one).

Before reducing, the instances exchange the shape and dtype of their tensor,
so a mismatch is an error on every instance instead of a failure deep in the
transport: Horovod's coordination error (a FailedPreconditionError "Mismatched
ALLREDUCE tensor shapes: ...", horovod/common/controller.cc) on this API, the
`LayoutMismatchError` that `host_collective_ops` reports as PopDist does.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import threading
import zlib
from collections.abc import Iterator

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework import errors, indexed_slices, ops
from tensorflow.python.ops import collective_ops, gen_resource_variable_ops

from openipu._src.distributed import cluster_runtime
from openipu._src.integration import run_errors

# The instances' group, apart from the groups of strategies (see `collective_extended`).
_GROUP_KEY = 2_000_000
# Dimensions exchanged per tensor: TensorFlow's largest rank (TensorShape's kMaxDims,
# tensorflow/core/framework/tensor_shape.h), so a tensor of any rank is checked.
_MAX_RANK = 254

_OPS = {
    "average": ("Add", "Div"),
    "sum": ("Add", "Id"),
    "min": ("Min", "Id"),
    "max": ("Max", "Id"),
    "product": ("Mul", "Id"),
}
Average = "average"
Sum = "sum"
Min = "min"
Max = "max"
Product = "product"
# Horovod's Adasum: the original exported it but refused it in `allreduce`
# (tensorflow/python/ipu/distributed/__init__.py before "Drop Horovod").
Adasum = "adasum"

_instance_keys = itertools.count(1)
_instance_keys_lock = threading.Lock()
# Keys of collectives named by their tensor (`keys_named`): above the counted ones.
_NAMED_KEYS_BASE = 1 << 30
_named_keys = threading.local()


class LayoutMismatchError(ValueError):
    """The instances passed tensors of different shapes or dtypes to one collective."""


# Horovod's coordination errors for tensors that differ across ranks
# (horovod/common/controller.cc ConstructResponse): a Status::PreconditionError, which its
# TensorFlow ops raise as FailedPreconditionError. Graph-mode assertions holding these
# texts become that error when they fail.
_HOROVOD_MARKERS = (
    "Mismatched ALLREDUCE tensor shapes",
    "Mismatched ALLGATHER tensor shapes",
    "Mismatched BROADCAST tensor shapes",
    "Mismatched data types",
)
# Whether a mismatch is reported as PopDist's host collectives do (`host_collective_ops`).
_popdist_layouts: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "openipu_popdist_layouts", default=False
)


@contextlib.contextmanager
def popdist_layout_errors() -> Iterator[None]:
    """Inside, a mismatch is a `LayoutMismatchError` (eagerly) or a failed assertion naming
    every instance's layout (in a graph), not Horovod's error."""
    token = _popdist_layouts.set(True)
    try:
        yield
    finally:
        _popdist_layouts.reset(token)


def allreduce(tensor, op=None):
    """The reduction of `tensor` over every instance (the mean by default).

    `op` is `Average` (None), `Sum`, `Min`, `Max` or `Product`, or a
    `tf.distribute.ReduceOp`. An `IndexedSlices` is gathered (values and
    indices of every instance), which represents the reduced tensor.
    """
    if op == Adasum:
        raise NotImplementedError("The Adasum reduction is not implemented.")
    name = _op_name(op)
    if isinstance(tensor, indexed_slices.IndexedSlices):
        # As the original (tensorflow/python/ipu/distributed/__init__.py at 79fa5d2a01e^,
        # `allreduce`): whatever the op, the values and indices are gathered, and only
        # Average divides them by the instance count.
        values = allgather(tensor.values)
        if name == "average":
            values = values / _world_size()
        return indexed_slices.IndexedSlices(values, allgather(tensor.indices), tensor.dense_shape)
    tensor = tf.convert_to_tensor(tensor)
    runtime = cluster_runtime.start()
    if runtime is None:
        return tf.identity(tensor)
    merge_op, final_op = _OPS[name]
    with ops.device(runtime.host_device):
        checked = _checked_alike(tensor, runtime, "ALLREDUCE", same_first_dimension=True)
        return collective_ops.all_reduce_v2(
            checked,
            runtime.process_count,
            _GROUP_KEY,
            _next_instance_key(),
            merge_op=merge_op,
            final_op=final_op,
            ordering_token=_ordering_token(),
        )


def allgather(tensor, name=None):
    """`tensor` of every instance, concatenated along dimension 0 in instance order.

    Dimension 0 may differ between instances; the other dimensions must match. A scalar
    gives the vector of every instance's scalar, shape [instances], as the original's
    `ipu.distributed.allgather` does (tensorflow/python/ipu/distributed/
    host_collective_ops.py: its kernel inserts the instance dimension).
    """
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        tensor = tf.expand_dims(tensor, 0)
    elif tensor.shape.rank is None:
        # Known when it runs: a scalar still gains the instance dimension.
        tensor = tf.reshape(
            tensor,
            tf.concat(
                [tf.shape(tensor), tf.ones([1 - tf.minimum(tf.rank(tensor), 1)], tf.int32)], 0
            ),
        )
    runtime = cluster_runtime.start()
    if runtime is None:
        return tf.identity(tensor, name=name)
    with ops.device(runtime.host_device):
        shapes = _exchange_shapes(tensor, runtime)
        checked = _assert_alike(tensor, shapes, "ALLGATHER", same_first_dimension=False)
        sizes = shapes[:, 2]  # dtype, rank, then the dimensions
        longest = tf.reduce_max(sizes)
        padding = tf.concat(
            [
                [[0, longest - tf.shape(checked, out_type=tf.int64)[0]]],
                tf.zeros([tf.rank(checked) - 1, 2], tf.int64),
            ],
            axis=0,
        )
        gathered = collective_ops.all_gather_v2(
            tf.pad(checked, padding),
            runtime.process_count,
            _GROUP_KEY,
            _next_instance_key(),
            ordering_token=_ordering_token(),
        )
        pieces = [
            gathered[i * longest : i * longest + sizes[i]] for i in range(runtime.process_count)
        ]
        return tf.concat(pieces, axis=0, name=name)


def broadcast(tensor: object, root_rank: int, name: str | None = None) -> tf.Tensor:
    """The `tensor` of instance `root_rank`, on every instance."""
    tensor = tf.convert_to_tensor(tensor)
    size = _world_size()
    if isinstance(root_rank, bool) or not isinstance(root_rank, (int, np.integer)):
        raise TypeError(f"broadcast: root_rank must be an int, got {root_rank!r}")
    if not 0 <= root_rank < size:
        raise ValueError(
            f"broadcast: root_rank={root_rank} does not exist: the run has {size} instance(s), "
            f"ranks 0 to {size - 1}"
        )
    runtime = cluster_runtime.start()
    if runtime is None:
        return tf.identity(tensor, name=name)
    with ops.device(runtime.host_device):
        checked = _checked_alike(tensor, runtime, "BROADCAST", same_first_dimension=True)
        key = _next_instance_key()
        if runtime.task_id == root_rank:
            sent = collective_ops.broadcast_send_v2(checked, runtime.process_count, _GROUP_KEY, key)
            with tf.control_dependencies([sent]):
                return tf.identity(checked, name=name)
        received = collective_ops.broadcast_recv_v2(
            tf.shape(checked), checked.dtype, runtime.process_count, _GROUP_KEY, key
        )
        return tf.identity(received, name=name)


def world_size() -> int:
    """Instances in the run (1 without a multi-process cluster)."""
    return _world_size()


def world_rank() -> int:
    """This instance's rank."""
    runtime = cluster_runtime.start()
    return 0 if runtime is None else runtime.task_id


def _world_size() -> int:
    runtime = cluster_runtime.start()
    return 1 if runtime is None else runtime.process_count


def _op_name(op) -> str:
    if op is None:
        return "average"
    if isinstance(op, tf.distribute.ReduceOp):
        return {tf.distribute.ReduceOp.SUM: "sum", tf.distribute.ReduceOp.MEAN: "average"}[op]
    if isinstance(op, str) and op.lower() in (*_OPS, "mean"):
        return "average" if op.lower() == "mean" else op.lower()
    raise ValueError(
        f"allreduce: op={op!r} is not one of Average (the default), Sum, Min, Max, Product "
        "or a tf.distribute.ReduceOp"
    )


def _checked_alike(tensor, runtime, what: str, same_first_dimension: bool):
    shapes = _exchange_shapes(tensor, runtime)
    return _assert_alike(tensor, shapes, what, same_first_dimension)


def _exchange_shapes(tensor, runtime) -> tf.Tensor:
    """[instances, 2 + _MAX_RANK]: each instance's dtype, rank and dimensions."""
    rank = tf.rank(tensor) if tensor.shape.rank is None else tensor.shape.rank
    rank = tf.cast(rank, tf.int64)
    description = tf.concat(
        [
            tf.stack([tf.constant(tensor.dtype.as_datatype_enum, tf.int64), rank]),
            tf.shape(tensor, out_type=tf.int64),
            tf.fill([_MAX_RANK - rank], tf.constant(-1, tf.int64)),
        ],
        axis=0,
    )
    gathered = collective_ops.all_gather_v2(
        description[None],
        runtime.process_count,
        _GROUP_KEY,
        _next_instance_key(),
        ordering_token=_ordering_token(),
    )
    return tf.reshape(gathered, [runtime.process_count, 2 + _MAX_RANK])


def _assert_alike(tensor, shapes: tf.Tensor, what: str, same_first_dimension: bool):
    """`tensor`, once every instance's layout (`shapes`) agrees for the collective `what`
    (Horovod's request type: ALLREDUCE, ALLGATHER or BROADCAST)."""
    popdist = _popdist_layouts.get()
    compared = shapes if same_first_dimension else tf.concat([shapes[:, :2], shapes[:, 3:]], 1)
    alike = tf.reduce_all(tf.equal(compared, compared[0]))
    if context.executing_eagerly():
        if not bool(alike):
            if popdist:
                raise LayoutMismatchError(
                    _mismatch_message(what.lower(), shapes.numpy(), same_first_dimension)
                )
            raise errors.FailedPreconditionError(None, None, _horovod_message(what, shapes.numpy()))
        return tensor
    if not popdist:
        for marker in _HOROVOD_MARKERS:
            run_errors.install(run_errors.assertion_as(errors.FailedPreconditionError, marker))
        message = tf.numpy_function(
            lambda rows: _horovod_message(what, rows).encode(), [shapes], tf.string, stateful=False
        )
        check = tf.debugging.Assert(alike, [message])
        with tf.control_dependencies([check]):
            return tf.identity(tensor)
    # Only the columns up to the longest rank are shown.
    shown = shapes[:, : 2 + tf.reduce_max(shapes[:, 1])]
    check = tf.debugging.Assert(
        alike,
        [
            f"{what.lower()}: the tensors differ across instances ("
            + (
                "shape and dtype"
                if same_first_dimension
                else "dtype, rank or a dimension after the first"
            )
            + " must match). Each row is one instance, in rank order: dtype enum, rank, "
            "dimensions (-1 past the rank):",
            shown,
        ],
        summarize=(2 + _MAX_RANK) * 1024,
    )
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


def _horovod_message(what: str, shapes: np.ndarray) -> str:
    """Horovod's coordination error for rank 0's request against the first that differs
    (horovod/common/controller.cc ConstructResponse); "" when all agree."""
    first = shapes[0]
    for row in shapes[1:]:
        if row[0] != first[0]:
            return (
                f"Mismatched data types: One rank had type {_horovod_type(first[0])}, but "
                f"another rank had type {_horovod_type(row[0])}."
            )
    for row in shapes[1:]:
        dims, other = _dims(first), _dims(row)
        if what != "ALLGATHER":
            if dims != other:
                return (
                    f"Mismatched {what} tensor shapes: One rank sent a tensor of shape "
                    f"{_shape_text(dims)}, but another rank sent a tensor of shape "
                    f"{_shape_text(other)}."
                )
            continue
        if len(dims) != len(other):
            return (
                f"Mismatched {what} tensor shapes: One rank sent a tensor of rank {len(dims)}, "
                f"but another rank sent a tensor of rank {len(other)}."
            )
        for dim in range(1, len(dims)):
            if dims[dim] != other[dim]:
                return (
                    f"Mismatched {what} tensor shapes: One rank sent a tensor with dimension "
                    f"{dim} equal to {dims[dim]}, but another rank sent a tensor with "
                    f"dimension {dim} equal to {other[dim]}."
                )
    return ""


def _dims(row: np.ndarray) -> list[int]:
    return [int(d) for d in row[2 : 2 + int(row[1])]]


def _shape_text(dims: list[int]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _horovod_type(enum: int) -> str:
    return "HOROVOD_" + tf.dtypes.as_dtype(int(enum)).name.upper()


def _mismatch_message(what: str, shapes: np.ndarray, same_first_dimension: bool) -> str:
    described = []
    for rank_index, row in enumerate(shapes):
        dtype = tf.dtypes.as_dtype(int(row[0])).name
        described.append(f"instance {rank_index} has shape {_dims(row)} ({dtype})")
    rule = (
        "every instance's tensor must have the same shape and dtype"
        if same_first_dimension
        else "the tensors must have the same dtype, rank and dimensions after the first"
    )
    return f"{what}: {rule}, but " + ", ".join(described)


@contextlib.contextmanager
def keys_named(name: str) -> Iterator[None]:
    """The collectives started inside take instance keys derived from `name`.

    Instances that run their named collectives in different orders (in a function,
    where nothing orders them) still pair each one with its namesake; the original's
    host collectives (tensorflow/python/ipu/distributed/host_collective_ops.py) match
    them by tensor name.
    """
    base = _NAMED_KEYS_BASE + (zlib.crc32(name.encode()) % (1 << 28)) * 4
    previous = getattr(_named_keys, "keys", None), getattr(_named_keys, "token", None)
    _named_keys.keys = itertools.count(base)
    # A function orders its stateful operations as written, unless they hold a
    # resource: a token of the name's own orders its collectives only among themselves.
    # The token is made eagerly and captured: made in the function, it would itself be
    # ordered after the operations before it.
    runtime = cluster_runtime.start()
    with ops.init_scope(), ops.device(runtime.host_device if runtime else "/device:CPU:0"):
        _named_keys.token = gen_resource_variable_ops.var_handle_op(
            dtype=tf.float32, shape=[], shared_name=f"openipu_host_collective_{name}"
        )
    try:
        yield
    finally:
        _named_keys.keys, _named_keys.token = previous


def _ordering_token() -> tf.Tensor | None:
    return getattr(_named_keys, "token", None)


def _next_instance_key():
    """A fresh instance key, taken each time the collective runs (as TensorFlow's own do).

    Inside a function being traced, the key is a value captured at call time, so
    instances that trace a function a different number of times still agree.
    """
    named = getattr(_named_keys, "keys", None)
    if named is not None:
        with ops.device("/device:CPU:0"):
            return tf.constant(next(named), tf.int32)
    graph = ops.get_default_graph()
    while getattr(graph, "is_control_flow_graph", False):
        graph = graph.outer_graph
    if not context.executing_eagerly() and graph.building_function:
        with graph.as_default():
            return graph.capture_call_time_value(_next_instance_key, tf.TensorSpec([], tf.int32))
    with _instance_keys_lock:
        key = next(_instance_keys)
    with ops.device("/device:CPU:0"):
        return tf.constant(key, tf.int32)
