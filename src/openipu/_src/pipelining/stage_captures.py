"""What a pipeline's stages may use from outside the pipeline.

The original builds the pipeline as one function whose arguments are its `inputs` (and
the infeed's elements); a stage using any other tensor from outside is refused when the
pipeline is built, unless the tensor is a resource (a variable) or an eager constant
(ops/functional_ops.py `_compile_function`, ops/pipelining_ops.py: "Trying to capture
the tensor ... which is not a resource"). Here the stages are traced inside the engine's
loops, which capture such tensors silently: `CaptureCheck` finds those the stages made
the loop graphs capture and refuses them with the original's error.
"""

from __future__ import annotations

from collections.abc import Iterable

import tensorflow as tf
from tensorflow.python.framework import func_graph as func_graph_module
from tensorflow.python.framework import ops


class CaptureCheck:
    """Started before the stages are traced in the current graph; `check()` after."""

    def __init__(self, allowed: Iterable[object]) -> None:
        self._graph = ops.get_default_graph()
        self._captured_before = _capture_count(self._graph)
        self._allowed = {id(t) for t in allowed if isinstance(t, (tf.Tensor, tf.Variable))}

    def check(self) -> None:
        graph = self._graph
        if not isinstance(graph, func_graph_module.FuncGraph):
            return
        for external, _ in list(graph.captures)[self._captured_before :]:
            source = _outermost_source(external)
            if self._refused(source):
                # The original's words (ops/pipelining_ops.py).
                raise ValueError(
                    f"Trying to capture the tensor {source.name} which is not a resource. "
                    "This tensor needs to be passed as either part of the `input` or "
                    "`infeed_queue` of the pipeline."
                )

    def _refused(self, source: tf.Tensor) -> bool:
        if source.dtype in (tf.resource, tf.variant) or isinstance(source, ops.EagerTensor):
            return False
        if id(source) in self._allowed:
            return False
        # What the user's program made outside the pipeline: a tensor of a TF1 graph, or an
        # argument of a tf.function. (The engine's own values live in function graphs.)
        graph = source.graph
        if not isinstance(graph, func_graph_module.FuncGraph):
            return True
        return any(source is t for t in graph.inputs) and not _is_loop_graph(graph)


def _capture_count(graph: ops.Graph) -> int:
    return len(graph.captures) if isinstance(graph, func_graph_module.FuncGraph) else 0


def _is_loop_graph(graph: ops.Graph) -> bool:
    return type(graph).__name__ in ("WhileBodyFuncGraph", "WhileCondFuncGraph")


def _outermost_source(tensor: tf.Tensor) -> tf.Tensor:
    """The tensor `tensor` stands for, following captures out through function graphs."""
    if isinstance(tensor, ops.EagerTensor):
        return tensor
    current = tensor.graph
    while isinstance(current, func_graph_module.FuncGraph):
        outer = {id(internal): external for external, internal in current.captures}
        external = outer.get(id(tensor))
        if external is None:
            return tensor
        if isinstance(external, ops.EagerTensor):
            return external
        tensor, current = external, external.graph
    return tensor
