"""The device loop: N iterations of a body inside a compiled region.

This is the one execution engine. `loops.repeat`, `loops.while_loop`,
pipelines, Keras `fit`/`evaluate`/`predict` and PopART sessions all build
their on-device loop here:

- infeed data is fetched by the host *before* the region runs, as one stacked
  buffer of N elements, and the loop slices element i out of it on the device;
- outfeed data is written on the device into a buffer of N elements (see
  `LoopContext.outfeed_buffer`) that the host reads once the region has run;
- the loop itself, with everything in it, is part of the compiled region, so
  under XLA the N iterations are one computation with no host round trip.

When that is impossible (a while loop of unknown length consuming an infeed,
an enqueue inside a conditional), the loop falls back to fetching and
enqueuing on every iteration, which is correct but makes the region run as a
plain TensorFlow graph.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import operator
import threading
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_v2_func_graphs
from tensorflow.python.util import nest

from openipu._src.engine import device_scope
from openipu._src.engine import region as region_lib
from openipu._src.engine.cost_model import tf_workload
from openipu._src.engine.executable import stream_capture
from openipu._src.engine.replicas import shared_loop
from openipu._src.engine.value_types import Infeed, Nested
from openipu._src.system import configure

_state = threading.local()


class LoopContext:
    """A device loop being built: its trip count and current iteration index.

    The trip count is a number, a host tensor computed before the region runs, or
    None when it is only known as the loop runs.
    """

    def __init__(
        self, trip_count: int | tf.Tensor | None, graph_of_body: ops.Graph | None = None
    ) -> None:
        self.trip_count = trip_count
        self.index: tf.Tensor | None = None
        self.body_graph = graph_of_body


def loop_stack() -> list[LoopContext]:
    stack: list[LoopContext] = _state.__dict__.setdefault("loops", [])
    return stack


@contextlib.contextmanager
def _entered(context: LoopContext) -> Iterator[LoopContext]:
    stack = loop_stack()
    stack.append(context)
    try:
        yield context
    finally:
        stack.pop()


def flat_iteration() -> tuple[tf.Tensor, int | tf.Tensor] | None:
    """The iteration index across all enclosing device loops, and their total trip count.

    The total is a host tensor when some enclosing loop's trip count is one.

    None when some enclosing loop has no fixed trip count, or when ops built
    now would not be in the body of the innermost loop (for example inside a
    conditional), where a per-iteration buffer slot cannot be addressed.
    """
    stack = loop_stack()
    if not stack or any(c.trip_count is None or c.index is None for c in stack):
        return None
    if ops.get_default_graph() is not stack[-1].body_graph or _inside_other_control_flow(stack):
        return None
    index = tf.constant(0, tf.int32)
    for context in stack:
        index = index * context.trip_count + context.index
    counts = [context.trip_count for context in stack]
    if all(isinstance(count, int) for count in counts):
        return index, math.prod(counts)
    region = region_lib.current_region()
    assert region is not None  # a device loop is always built inside a region
    with region.on_host():  # the host sizes buffers before the region
        return index, functools.reduce(operator.mul, counts)


def _inside_other_control_flow(stack: list[LoopContext]) -> bool:
    """Whether a loop or conditional that is no device loop encloses the innermost body.

    Its iterations would write the same buffer slots again, its branches skip them.
    """
    region = region_lib.current_region()
    bodies = {id(context.body_graph) for context in stack}
    graph = stack[-1].body_graph
    while region is not None and graph is not None and graph is not region.graph:
        if id(graph) not in bodies and isinstance(graph, _CONTROL_FLOW_GRAPHS):
            return True
        graph = getattr(graph, "outer_graph", None)
    return False


_CONTROL_FLOW_GRAPHS = (
    control_flow_v2_func_graphs.WhileBodyFuncGraph,
    control_flow_v2_func_graphs.WhileCondFuncGraph,
    control_flow_v2_func_graphs.CondBranchFuncGraph,
)


def _as_list(values: Nested) -> list[Nested]:
    if values is None:
        return []
    if isinstance(values, (list, tuple)):
        return list(values)
    return [values]


def _split_body_outputs(outputs: Nested) -> tuple[list[tf.Tensor], list[ops.Operation]]:
    items = _as_list(outputs)
    tensors = [o for o in items if not isinstance(o, ops.Operation)]
    operations = [o for o in items if isinstance(o, ops.Operation)]
    return [tf.convert_to_tensor(t) for t in tensors], operations


def _element_args(element: Nested) -> tuple[list[Nested], dict[str, Nested]]:
    if element is None:
        return [], {}
    if isinstance(element, dict):
        return [], dict(element)
    if isinstance(element, (list, tuple)):
        return list(element), {}
    return [element], {}


def check_signature(
    function: Callable[..., Any], role: str, args: list[Nested], kwargs: dict[str, Nested]
) -> None:
    """Raises TypeError when `function` cannot take the loop's arguments."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        names = list(kwargs)
        raise TypeError(
            f"The loop {role} {getattr(function, '__name__', function)!r} cannot be called with "
            f"{len(args)} positional argument(s)"
            + (f" and keyword argument(s) {names}" if names else "")
            + f" (the loop-carried values, then the infeed element): {error}"
        ) from None


def repeat(
    n: int | tf.Tensor,
    body: Callable[..., Nested],
    inputs: Nested = None,
    infeed: Infeed | None = None,
) -> Nested:
    """Runs `body` `n` times in the current compiled region (opening one if needed).

    `n` may be an integer tensor known only when the program runs: the loop is then the
    original's form of `repeat`, a `while_loop` of at most `n` iterations
    (tensorflow/python/ipu/loops.py), whose iterations read the infeed one by one."""
    if isinstance(n, (tf.Tensor, tf.Variable)) and n.dtype.is_integer:
        return while_loop(lambda *_: True, body, inputs, infeed, n)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"repeat: n must be a Python int, got {n!r}")
    # The original's repeat is a while_loop bounded by maximum_iterations=n
    # (tensorflow/python/ipu/loops.py): a negative n runs no iteration, as 0 does.
    n = max(n, 0)
    capture = stream_capture.current()
    if (
        capture is not None
        and infeed is not None
        and not getattr(infeed, "is_device_buffer", False)
    ):
        # Traced for an executable: its builder runs the body over each call's elements.
        return capture.take_loop(n, body, inputs, infeed)
    if capture is not None and infeed is None and capture.repeat_without_infeed is not None:
        streamed = capture.repeat_without_infeed(n, body, inputs)
        if streamed is not stream_capture.NOT_HANDLED:
            return streamed
    if region_lib.current_region() is None:
        return _in_own_region(lambda: repeat(n, body, inputs, infeed))
    if shared_loop.in_replicas():
        # One loop for all replicas, synchronising them every iteration.
        return shared_loop.repeat(n, body, inputs, infeed, repeat)

    carried = [tf.convert_to_tensor(v) for v in _as_list(inputs)]
    stacked = _prefetch(infeed, n)
    context = LoopContext(trip_count=n)

    def loop_body(i: tf.Tensor, *values: tf.Tensor) -> list[tf.Tensor]:
        context.index = i
        context.body_graph = ops.get_default_graph()
        if stacked is not None and n == 0:
            # The body is built but never runs: an empty buffer has no element to slice
            # (XLA refuses a slice past its static size), so it sees zeros of the shape.
            element = nest.map_structure(lambda b: tf.zeros(b.shape[1:], b.dtype), stacked)
        elif stacked is not None:
            element = nest.map_structure(lambda buffer: buffer[i], stacked)
        else:
            element = _fetch_each_iteration(infeed)
        new_values, operations = _call_body(body, list(values), element)
        return [_after(operations, i + 1)] + new_values

    with _entered(context):
        results = tf.while_loop(
            lambda i, *_: i < n,
            loop_body,
            [tf.constant(0, tf.int32)] + carried,
            # A known bound lets XLA compile the loop's gradient (its accumulators need
            # a fixed size), as the original's repeat does (tensorflow/python/ipu/loops.py).
            maximum_iterations=n,
            parallel_iterations=1,  # iterations run in order, as on the device
            name="ipu_repeat",
        )
    if isinstance(n, int):
        tf_workload.mark_trip_count(results, n)
    return _loop_results(results[1:], results[0])


def repeat_in_groups(
    groups: int,
    group_size: int,
    step: Callable[..., object],
    after_group: Callable[[], object],
    infeed: Infeed | None = None,
) -> Nested:
    """`groups` times: `group_size` iterations of `step`, then `after_group()`.

    The shape of every program that accumulates gradients: the micro-batches of a
    group, then the one weight update from their accumulated gradients (Keras and
    PopART programs through `LoopProgram`, pipelines' repeats of mini-batches). `step`
    returns operations (or nothing); `infeed` gives each group its elements: a
    `StackedInput` of [groups, group_size, ...] buffers, or an infeed read once per
    step (each group's loop reads it).
    """
    stacked = getattr(infeed, "is_device_buffer", False)

    def run_group(*element: Nested) -> list[tf.Operation]:
        steps = repeat(group_size, step, [], StackedInput(element[0]) if stacked else infeed)
        with tf.control_dependencies([steps]):
            after = after_group()
        dependencies = [after] if isinstance(after, (tf.Tensor, ops.Operation)) else []
        with tf.control_dependencies(dependencies):
            return [tf.no_op(name="ipu_group_done")]

    return repeat(groups, run_group, [], infeed if stacked else None)


def while_loop(
    condition: Callable[..., Nested],
    body: Callable[..., Nested],
    inputs: Nested = None,
    infeed: Infeed | None = None,
    maximum_iterations: int | None = None,
) -> Nested:
    """Runs `body` while `condition` holds, in the current compiled region."""
    if region_lib.current_region() is None:
        return _in_own_region(
            lambda: while_loop(condition, body, inputs, infeed, maximum_iterations)
        )
    if shared_loop.in_replicas():
        return shared_loop.while_loop(
            condition, body, inputs, infeed, maximum_iterations, while_loop
        )
    carried = [tf.convert_to_tensor(v) for v in _as_list(inputs)]
    check_signature(condition, "condition", carried, {})
    if infeed is None:
        check_signature(body, "body", carried, {})
    context = LoopContext(trip_count=None)

    def loop_body(*values: tf.Tensor) -> list[tf.Tensor]:
        context.body_graph = ops.get_default_graph()
        element = _fetch_each_iteration(infeed)
        if not carried:
            # A dummy loop value carries the body's side effects.
            new_values, operations = _call_body(body, [], element)
            return [_after(operations, values[0])]
        new_values, _ = _call_body(body, list(values), element)
        return new_values

    def loop_condition(*values: tf.Tensor) -> tf.Tensor:
        result = condition(*values) if carried else condition()
        return tf.convert_to_tensor(result, dtype=tf.bool)

    with _entered(context):
        results = tf.while_loop(
            loop_condition,
            loop_body,
            carried or [tf.constant(0, tf.int32)],
            maximum_iterations=maximum_iterations,
            parallel_iterations=1,
            name="ipu_while",
        )
    if not carried:
        return _loop_results([], _as_list(results)[0])  # the dummy value, after the body
    return _loop_results(_as_list(results), _as_list(results)[0])


def _call_body(
    body: Callable[..., Nested], values: list[tf.Tensor], element: Nested
) -> tuple[list[tf.Tensor], list[ops.Operation]]:
    """The body's new loop values, and the operations it returned (which must run)."""
    args, kwargs = _element_args(element)
    check_signature(body, "body", values + args, kwargs)
    tensors, operations = _split_body_outputs(body(*values, *args, **kwargs))
    if len(tensors) != len(values):
        raise ValueError(
            f"The loop body returned {len(tensors)} tensor(s) but the loop carries "
            f"{len(values)} value(s): it must return the new value of every input"
        )
    if operations:
        with tf.control_dependencies(operations):
            tensors = [tf.identity(t) for t in tensors]
    return tensors, operations


def _after(operations: list[ops.Operation], value: tf.Tensor) -> tf.Tensor:
    if not operations:
        return value
    with tf.control_dependencies(operations):
        return tf.identity(value)


def _loop_results(values: list[tf.Tensor], done: tf.Tensor) -> Nested:
    if not values:
        with tf.control_dependencies([done]):
            return tf.no_op(name="ipu_loop_done")
    if len(values) == 1:
        return values[0]
    return list(values)


class StackedInput:
    """An infeed whose next N elements are already stacked tensors on the device.

    Programs pass their call's inputs this way, and loops nested in a loop
    pass the slice of the outer element that belongs to them. No host work
    is needed to read it, so it also works inside other loops.
    """

    is_device_buffer = True

    def __init__(self, stacked: Nested) -> None:
        self._stacked = stacked

    def _fetch_stacked(self, count: int) -> tuple[Nested, ...]:
        for tensor in nest.flatten(self._stacked):
            leading = tensor.shape[0] if tensor.shape.rank else None
            if leading is not None and leading != count:
                raise ValueError(
                    f"The loop runs {count} iterations but was given inputs for "
                    f"{leading} iterations (shape {tensor.shape})"
                )
        # One positional argument per iteration: the element, whatever its structure.
        return (self._stacked,)

    def _fetch_one(self) -> Nested:
        raise ValueError("Stacked inputs can only feed a loop of known length")


def _prefetch(infeed: Infeed | None, n: int) -> tuple[Nested, ...] | None:
    """The next `n` infeed elements as one stacked buffer, fetched by the host before the region."""
    if infeed is None:
        return None
    if getattr(infeed, "is_device_buffer", False):
        return infeed._fetch_stacked(n)  # noqa: SLF001
    if not region_lib.in_region_top_level() or loop_stack():
        return None
    region = region_lib.current_region()
    assert region is not None  # checked by in_region_top_level above
    with region.on_host():
        return infeed._fetch_stacked(n)  # noqa: SLF001 - the engine is the infeed's consumer


def _fetch_each_iteration(infeed: Infeed | None) -> Nested:
    return None if infeed is None else infeed._fetch_one()  # noqa: SLF001


def _in_own_region(build: Callable[[], Nested]) -> Nested:
    ordinal = device_scope.current_ipu_ordinal() or 0
    system = configure.current_system("an IPU loop")
    return region_lib.compile_region(
        lambda: build(),
        [],
        system.device(ordinal).host_device(),
        ipu_ordinal=ordinal,
        flat_return_rules=False,
    )
