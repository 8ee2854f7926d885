"""`ipu.loops`: device loops, the front end of the engine's `device_loop`."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

from openipu._src.engine import device_loop
from openipu._src.feeds.infeed import IPUInfeedQueue
from openipu._src.int_like import plain_int


def _check_infeed(infeed_queue) -> None:
    if infeed_queue is not None and not isinstance(infeed_queue, IPUInfeedQueue):
        raise TypeError(
            f"infeed_queue must be an ipu_infeed_queue.IPUInfeedQueue or None, got "
            f"{type(infeed_queue).__name__}"
        )


def _unpacking_a_lone_dict(body: Callable, infeed_queue) -> Callable:
    """`body`, called as the original's loops.py calls it: an infeed element that is a 1-tuple
    holding a dict with string keys gives the dict's values as keyword arguments."""
    spec = infeed_queue.element_spec if infeed_queue is not None else None
    if not (
        isinstance(spec, tuple)
        and len(spec) == 1
        and isinstance(spec[0], dict)
        and all(isinstance(key, str) for key in spec[0])
    ):
        return body

    def unpacked(*args):
        *carried, element = args
        return body(*carried, **element)

    return unpacked


def _float_trip_count(n: float) -> int:
    """How many iterations the original's `repeat` (or `while_loop`'s maximum_iterations)
    allows for a float `n`.

    Its repeat is a while_loop with maximum_iterations=n (tensorflow/python/ipu/loops.py),
    so control_flow_ops.while_loop decides: eagerly it runs int(n) iterations; in a TF1
    graph (control flow v1) its counter has n's dtype and runs while `i < n`, ceil(n)
    iterations; with control flow v2 (TF2 functions) while_v2 converts n to an int32
    tensor and fails (tensorflow/python/ops/control_flow_ops.py, while_v2.py)."""
    if tf.executing_eagerly():
        return int(n)
    if control_flow_util.EnableControlFlowV2(ops.get_default_graph()):
        raise TypeError(f"Expected int32, got {n!r} of type '{type(n).__name__}' instead.")
    return 0 if math.isnan(n) else max(math.ceil(n), 0)


def repeat(n: int, body: Callable, inputs=None, infeed_queue=None, use_while_v1: bool = True):
    """Builds a loop that runs `body` exactly `n` times; returns the final loop-carried values."""
    _check_infeed(infeed_queue)
    body = _unpacking_a_lone_dict(body, infeed_queue)
    if isinstance(n, (float, np.floating)):
        n = _float_trip_count(float(n))
    # A tensor count known only when the program runs is the engine's too.
    return device_loop.repeat(plain_int(n), body, inputs, infeed_queue)


def while_loop(
    condition: Callable,
    body: Callable,
    inputs=None,
    infeed_queue=None,
    maximum_iterations: int | None = None,
    use_while_v1: bool = True,
):
    """Builds a loop that runs `body` while `condition` holds; returns the final values."""
    _check_infeed(infeed_queue)
    body = _unpacking_a_lone_dict(body, infeed_queue)
    if isinstance(maximum_iterations, (float, np.floating)):
        # The same while_loop as the original's repeat: see `_float_trip_count`.
        maximum_iterations = _float_trip_count(float(maximum_iterations))
    maximum_iterations = plain_int(maximum_iterations)
    return device_loop.while_loop(condition, body, inputs, infeed_queue, maximum_iterations)
