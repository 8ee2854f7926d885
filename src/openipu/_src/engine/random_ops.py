"""Random operations inside compiled regions draw from the emulated IPU's seed.

On an IPU every random operation of a compiled program is driven by the
device's hardware seed (one per replica), which `utils.reset_ipu_seed`
resets. To reproduce that, while a region is being built every stateful
random operation TensorFlow creates (`tf.random.uniform`, `tf.random.normal`,
the Keras initialisers and dropout built on them, ...) is replaced by its
stateless counterpart seeded from the device's `tf.random.Generator`
(`system.seeds`). The replacement compiles under XLA, and resetting the
generator makes the program's random numbers repeat.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.framework import op_callbacks

from openipu._src.system import seeds

_state = threading.local()


def _stateless(op: tf.Operation, seed: tf.Tensor) -> tf.Tensor | None:
    op_type = op.type
    inputs = op.inputs
    dtype = op.get_attr("dtype") if op_type != "RandomUniformInt" else None
    shape = inputs[0]
    if op_type == "RandomUniform":
        return tf.random.stateless_uniform(shape, seed, dtype=dtype)
    if op_type == "RandomStandardNormal":
        return tf.random.stateless_normal(shape, seed, dtype=dtype)
    if op_type == "TruncatedNormal":
        return tf.random.stateless_truncated_normal(shape, seed, dtype=dtype)
    if op_type == "RandomUniformInt":
        out_type = op.get_attr("Tout")
        return tf.random.stateless_uniform(
            shape, seed, minval=inputs[1], maxval=inputs[2], dtype=out_type
        )
    return None


# Stateful random ops replaced by stateless ones (the replaced originals stay unused).
REPLACED_OPS = frozenset(
    {"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"}
)


def register_replica_streams(device_ordinal: int, first: int) -> None:
    """In a program traced once, replica r draws from seed stream `first + r` of the device.

    Replica 0's ops advance stream `first`'s state; replica r's copies of them advance
    stream `first + r`'s (`variable_copies.set_counterparts`).
    """
    # variable_copies reaches this module through the replicas: imported here, not above.
    from openipu._src.engine.replicas import variable_copies

    state = seeds.generator(device_ordinal, first).state
    variable_copies.set_counterparts(
        state, lambda r: seeds.generator(device_ordinal, first + r).state
    )


@contextlib.contextmanager
def seeded_from_device(device_ordinal: int, replica: int = 0) -> Iterator[None]:
    """While building a region, routes stateful random ops to the device's generator.

    Only in TF2 functions: a TF1 graph keeps TensorFlow's graph-level seeding.
    Nested uses in one thread keep the outer stream (a one-replica program runs
    its replica in the thread that built the region).
    """
    # A TF1 graph's loop bodies are functions too: TF1 graphs are told apart by their
    # outermost context, which is not eager.
    tf1_graph = not tf.compat.v1.executing_eagerly_outside_functions()
    if not tf.inside_function() or tf1_graph or getattr(_state, "active", False):
        yield
        return
    generator = seeds.generator(device_ordinal, replica)

    def replace(
        op_type: str,
        inputs: tuple[tf.Tensor, ...],
        attrs: tuple[object, ...],
        outputs: list[tf.Tensor],
        op_name: str | None = None,
        graph: tf.Graph | None = None,
    ) -> list[tf.Tensor] | None:
        if op_type not in REPLACED_OPS or graph is None or getattr(_state, "busy", False):
            return None
        if not outputs or outputs[0].op.type != op_type:
            return None  # another stream already replaced it (a replica thread inherits callbacks)
        _state.busy = True
        try:
            with graph.as_default():
                seed = generator.make_seeds(1)[:, 0]
                replacement = _stateless(outputs[0].op, seed)
        finally:
            _state.busy = False
        return None if replacement is None else [replacement]

    op_callbacks.add_op_callback(replace)
    _state.active = True
    try:
        yield
    finally:
        _state.active = False
        op_callbacks.remove_op_callback(replace)
