"""Steps that share no state, run together instead of one after another.

When no step of a program reads what another step wrote (PopART inference: each batch
depends only on its own inputs and on weights that no batch changes), the order of the
steps is unobservable, so the device loop's N iterations can be replaced by one
computation over all N stacked elements. TensorFlow's vectorizer (pfor) turns the step's
ops into ops over the stacked axis: a matmul of each [B, K] element with loop-invariant
weights becomes one [N*B, K] matmul, a convolution runs on N*B images, a reduction keeps
its axes. Ops it cannot vectorize run in a loop of their own inside the same computation,
so the results are those of the loop in every case, to floating-point rounding.

A program that runs as a TensorFlow graph rather than under XLA gains little from the
vectorizer (its reshapes around each op hide a convolution's bias and activation from
oneDNN's fusions), so its steps can instead be unrolled (`run_unrolled`): N copies of the
step in one graph, which share no data, so TensorFlow's executor runs them concurrently on
the host's cores, where the loop runs one small step after another.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.ops.parallel_for import control_flow_ops as parallel_for
from tensorflow.python.util import nest

from openipu._src.engine.value_types import Nested


def run_together(step: Callable[[Nested], Nested], stacked: Nested, count: int) -> Nested:
    """`step(element_i)` for i in [0, count), stacked along a new leading axis.

    `stacked` is a structure of tensors of leading dimension `count`. The step returns a
    structure of tensors (or None, then None is returned after the steps ran).
    """
    if count == 1:
        # One step needs no vectorizing: its ops run as they are, on a leading axis of 1.
        outputs = step(nest.map_structure(lambda tensor: tensor[0], stacked))
        return nest.map_structure(lambda tensor: tf.expand_dims(tensor, 0), outputs)
    returned_nothing = False

    def iteration(index: tf.Tensor) -> Nested:
        nonlocal returned_nothing
        outputs = step(nest.map_structure(lambda tensor: tf.gather(tensor, index), stacked))
        if outputs is None:
            returned_nothing = True
            return tf.constant(0)
        return outputs

    outputs = parallel_for.pfor(iteration, count, fallback_to_while_loop=True, warn=False)
    return None if returned_nothing else outputs


def run_unrolled(step: Callable[[Nested], Nested], stacked: Nested, count: int) -> Nested:
    """Like `run_together`, with one copy of the step per element instead of vectorized ops."""
    outputs = [
        step(nest.map_structure(lambda tensor, i=i: tensor[i], stacked)) for i in range(count)
    ]
    if outputs[0] is None:
        return None
    return nest.map_structure(lambda *values: tf.stack(values), *outputs)
