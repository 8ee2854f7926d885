"""What the auto-pipeline planner reads from a Keras model's layer invocations.

`ipu_tensorflow_addons.keras.experimental.auto_pipeline.utils.keras_utils` of the
original: the memory of the tensors alive around each invocation (in the order of the
model's pipeline stage assignments) and a key telling two invocations that compute
alike. The answers are the facts its `keras_utils_test.py` checks: an invocation's
inputs are every tensor alive before it (each once), its carried-over tensors those of
them a later invocation still reads, its outputs the carried ones and what it makes.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import tensorflow as tf
from tf_keras.src.engine import keras_tensor


def prepend_batchsize(shape, batch_size: int):
    """`shape` with `batch_size` in place of an unknown leading dimension."""
    shape = tuple(tf.TensorShape(shape).as_list()) if not isinstance(shape, tuple) else shape
    if shape and shape[0] is None:
        return (batch_size, *shape[1:])
    return shape


def tf_tensor_size(x, batch_size: int) -> int:
    """Bytes of a tensor (or anything with a shape and dtype) at `batch_size`."""
    dims = prepend_batchsize(tuple(tf.TensorShape(x.shape).as_list()), batch_size)
    return functools.reduce(lambda a, b: a * b, dims, tf.as_dtype(x.dtype).size)


def tf_nested_map_structure_tensor(tensor_func, struct):
    """`struct` with `tensor_func` applied to each Keras symbolic tensor in it."""
    return tf.nest.map_structure(
        lambda x: tensor_func(x) if isinstance(x, keras_tensor.KerasTensor) else x, struct
    )


def tf_nested_map_structure_all_tensor(tensor_func, struct):
    """`struct` with `tensor_func` applied to everything with a shape and a dtype."""
    return tf.nest.map_structure(
        lambda x: tensor_func(x) if hasattr(x, "shape") and hasattr(x, "dtype") else x, struct
    )


def _node(assignment):
    return assignment.layer.inbound_nodes[getattr(assignment, "node_index", 0)]


def _unique(tensors) -> dict[int, object]:
    return {id(t): t for t in tensors}


def parse_model_intermediate(model, batch_size: int):
    """Per invocation: bytes carried over it, bytes alive before it, bytes alive after it."""
    nodes = [_node(a) for a in model.get_pipeline_stage_assignment()]
    reads = [_unique(tf.nest.flatten(node.keras_inputs)) for node in nodes]
    alive = _unique(tf.nest.flatten(model.inputs))
    carried_sizes, input_sizes, output_sizes = [], [], []
    for index, node in enumerate(nodes):
        later = {key for step in reads[index + 1 :] for key in step}
        carried = {key: t for key, t in alive.items() if key in later}
        made = _unique(tf.nest.flatten(node.outputs))
        after = {**carried, **made}

        def size(tensors) -> int:
            return sum(tf_tensor_size(t, batch_size) for t in tensors.values())

        carried_sizes.append(size(carried))
        input_sizes.append(size(alive))
        output_sizes.append(size(after))
        alive = after
    return np.array(carried_sizes), np.array(input_sizes), np.array(output_sizes)


def get_assignment_layer_type(assignment, batch_size: int) -> str:
    """A key equal for two invocations only when they compute alike.

    It holds the layer's class, the shapes and dtypes of the call's arguments and of
    the weights, and the config without names, initializers, `trainable` and float
    values (constants such as an epsilon, which change little of the computation).
    """
    layer = assignment.layer
    node = _node(assignment)
    described = {
        "class": [type(layer).__module__, type(layer).__name__],
        "args": tf_nested_map_structure_all_tensor(
            lambda x: str([prepend_batchsize(x.shape, batch_size), x.dtype]),
            [list(node.call_args), dict(node.call_kwargs)],
        ),
        "weight": [str([w.shape, w.dtype]) for w in layer.get_weights()],
        "config": {
            key: str(value)
            for key, value in layer.get_config().items()
            if not any(part in key for part in ("trainable", "initializer", "name"))
            and not isinstance(value, float)
        },
    }
    return json.dumps(described, sort_keys=True, default=str)
