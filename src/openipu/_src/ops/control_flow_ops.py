"""Scheduling control (`ipu.control_flow_ops`)."""

from __future__ import annotations

import tensorflow as tf


def barrier(tensors, insert_barrier_for_gradients: bool = False, name=None):
    """Returns `tensors` such that none of the outputs is ready before all inputs are.

    Each output depends on every input (control dependencies), which forces
    everything feeding the barrier to run before anything it feeds. With
    `insert_barrier_for_gradients` the gradients flowing back get a barrier too.
    """
    with tf.name_scope(name or "barrier"):
        flat = [tf.convert_to_tensor(t) for t in tf.nest.flatten(tensors)]
        if not flat:
            return tensors
        if insert_barrier_for_gradients:
            outputs = _barrier_with_gradient_barrier(*flat)
        else:
            outputs = _synchronised(flat)
        return tf.nest.pack_sequence_as(tensors, list(outputs))


def _synchronised(tensors: list[tf.Tensor]) -> list[tf.Tensor]:
    with tf.control_dependencies(tensors):
        return [tf.identity(t) for t in tensors]


@tf.custom_gradient
def _barrier_with_gradient_barrier(*tensors):
    def gradient(*upstream):
        synchronised = _synchronised([u for u in upstream if u is not None])
        position = iter(synchronised)
        return [None if u is None else next(position) for u in upstream]

    return _synchronised(list(tensors)), gradient
