"""Optimizer hyperparameters computed from a pipeline's tensors, carried to the weight update.

`optimizer_function` runs after the last stage of every mini-batch, so it may build an
optimizer whose learning rate (or momentum, ...) is a tensor computed from the stages'
outputs, e.g. `GradientDescentOptimizer(0.1 - 0.001 * global_step)` with the global step
a pipeline input (the original's ipu_pipeline_estimator_test.py,
testPassGlobalStepAsInput). The original's weight update (its resource-update function)
takes such a value from the last mini-batch. Here the weight update is built in another
loop body than the mini-batch, so those tensors are kept in buffers by the mini-batch
(`keep`) and the optimizer reads the buffers while its update is built (`swapped_in`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import tensorflow as tf
from tensorflow.python.framework import ops

from openipu._src.engine.gradient_accumulation import AccumulatorStore

# The attributes where optimizers keep their hyperparameters: tf.compat.v1 optimizers in
# their own attributes (`_learning_rate`, `_momentum`, `_beta1`...), Keras ones in `_hyper`.
_HYPER_DICT = "_hyper"


class KeptHyperparameters:
    """A replica's optimizer tensors from the last mini-batch, kept in buffers."""

    def __init__(self, store: AccumulatorStore) -> None:
        self._store = store
        self._kept: list[tuple[tuple[str, str | None], tf.Variable]] = []

    def keep(self, optimizer: object) -> list[object]:
        """Stores the tensors of `optimizer` built in the mini-batch's graph; returns the
        assignments, which the mini-batch runs."""
        self._kept = []
        assignments: list[object] = []
        for place, tensor in _body_tensors(optimizer):
            buffer = self._store.buffer(
                ("optimizer_hyperparameter", place, tensor.dtype, tuple(tensor.shape)),
                tensor.shape,
                tensor.dtype,
                f"pipeline_{place[-1] or place[0]}".replace("/", "_").strip("_") + "_kept",
            )
            self._kept.append((place, buffer))
            assignments.append(buffer.assign(tensor, read_value=False))
        return assignments

    @contextlib.contextmanager
    def swapped_in(self, optimizer: object) -> Iterator[None]:
        """While the weight update is built: the optimizer's kept tensors are the buffers'
        values (read in the update's graph); its own are put back afterwards."""
        previous = [(place, _get(optimizer, place)) for place, _ in self._kept]
        for place, buffer in self._kept:
            _set(optimizer, place, buffer.read_value())
        try:
            yield
        finally:
            for place, value in previous:
                _set(optimizer, place, value)


def _body_tensors(optimizer: object) -> list[tuple[tuple[str, str | None], tf.Tensor]]:
    """The (place, tensor) pairs of graph tensors the optimizer holds from the graph being
    built (not variables, not outer graphs' values, which the update can read itself)."""
    graph = ops.get_default_graph()
    found = []
    attributes = getattr(optimizer, "__dict__", {})
    for name, value in attributes.items():
        if name == _HYPER_DICT and isinstance(value, dict):
            found += [((name, key), v) for key, v in value.items() if _built_in(v, graph)]
        elif _built_in(value, graph):
            found.append(((name, None), value))
    return found


def _built_in(value: Any, graph: ops.Graph) -> bool:
    return (
        isinstance(value, tf.Tensor)
        and not isinstance(value, ops.EagerTensor)
        and (value.graph is graph)
    )


def _get(optimizer: object, place: tuple[str, str | None]) -> Any:
    name, key = place
    value = getattr(optimizer, name)
    return value if key is None else value[key]


def _set(optimizer: object, place: tuple[str, str | None], value: Any) -> None:
    name, key = place
    if key is None:
        setattr(optimizer, name, value)
    else:
        getattr(optimizer, name)[key] = value
