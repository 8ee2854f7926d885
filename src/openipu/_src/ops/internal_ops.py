"""Graphcore utility operators (`ipu.internal_ops`): FIFOs, iteration counters, printing
and tile remapping."""

from __future__ import annotations

import sys

import tensorflow as tf

from openipu._src.engine import device_loop
from openipu._src.engine import region as region_lib
from openipu._src.engine.engine_variables import engine_variable
from openipu._src.int_like import as_attr_int, plain_int


def fifo(x, depth, offload=False, name=None) -> tf.Tensor:
    """`x` as it was `depth` calls (iterations) ago; the first `depth` calls give zeros.

    The queue is a ring buffer of `depth` slots kept in device variables made when
    the program is built, with a counter saying which slot is oldest. `offload`
    (Poplar remote buffers) is accepted and kept: storage is host memory here.
    """
    depth = plain_int(depth)
    # The original compares `depth` with 1 as given, then hands it to the op's int attribute,
    # which takes int(depth): 2.5 queues 2 deep, 0.5 means no queue, a str is a TypeError
    # (tensorflow/python/ipu/ops/internal_ops.py, TensorFlow's op_def_library._MakeInt).
    try:
        no_queue = depth < 1
    except TypeError:
        raise TypeError(f"fifo: depth must be an int, got {depth!r}") from None
    depth = as_attr_int(depth, "fifo: depth")
    x = tf.convert_to_tensor(x)
    if no_queue:  # no queue at all, as in ops/internal_ops.py (a negative depth too)
        # Before the op (and its bool attribute `offload`) is made: any offload is taken.
        return tf.identity(x, name=name)
    if not isinstance(offload, bool):
        raise TypeError(f"fifo: offload must be a bool, got {offload!r}")
    if not x.shape.is_fully_defined():
        raise ValueError(f"fifo: x must have a fully defined shape, got {x.shape}")
    with tf.init_scope():
        # Made outside any function being traced: the queue outlives one trace's call. Engine
        # state, as the original's device queue: programs do not initialize it (in a TF1
        # graph a session does before its first run).
        slots = engine_variable(tf.zeros([depth, *x.shape], x.dtype), name="fifo_slots")
        calls = engine_variable(tf.constant(0, tf.int32), name="fifo_calls")
    with tf.name_scope(name or "fifo"):
        slot = calls.read_value() % depth
        oldest = tf.gather(slots.read_value(), slot)
        with tf.control_dependencies([oldest]):
            stored = slots.scatter_update(tf.IndexedSlices(x[None], slot[None]))
            counted = calls.assign_add(1)
        with tf.control_dependencies([stored, counted]):
            return tf.identity(oldest)


def get_current_iteration_counter(name=None, **kwargs) -> tf.Tensor:
    """Which gradient accumulation iteration the pipeline (its innermost device loop) is in."""
    stack = device_loop.loop_stack()
    if stack and stack[-1].index is not None:
        return tf.identity(tf.cast(stack[-1].index, tf.int32), name=name or "iteration_counter")
    if region_lib.current_region() is not None:
        # The original's ExecutionCounter op reads the innermost execution-counter scope:
        # outside any loop, the program's own, zeroed when it starts and never incremented
        # (compiler/plugin/poplar/driver/tools/execution_counter_util.cc, visitor_base.cc).
        return tf.constant(0, tf.int32, name=name or "iteration_counter")
    # The op has no host kernel: outside an IPU program it cannot run.
    raise tf.errors.NotFoundError(
        None,
        None,
        "get_current_iteration_counter: the ExecutionCounter op runs only in an IPU program "
        "(a function run by IPUStrategy, ipu_compiler.compile or a pipeline stage)",
    )


def print_tensor(input, name: str = ""):  # noqa: A002 - the original's parameter name
    """Prints `input` to standard error when the returned operation runs.

    Eagerly it prints at once (and returns None). Printing is a host
    operation: a program containing it is not compiled with XLA as a whole.
    """
    values = tf.convert_to_tensor(input)
    if name:
        return tf.print(f"{name}:", values, output_stream=sys.stderr, summarize=-1)
    return tf.print(values, output_stream=sys.stderr, summarize=-1)


def remap(x, name=None) -> tf.Tensor:
    """A copy of `x` laid out linearly over the IPU's tiles (a layout change only)."""
    return tf.identity(x, name=name or "remap")


def remap_deduce(x, name=None) -> tf.Tensor:
    """A copy of `x` with a tile layout deduced from `x` (a layout change only)."""
    return tf.identity(x, name=name or "remap_deduce")
