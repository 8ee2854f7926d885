"""What the IPU's compiler refuses to put in an executable, refused here as the original does.

- The IPU has no 64-bit floating point: the original's XLA backend registers no kernel
  for float64, so compiling a program that computes in float64 fails
  (tensorflow/compiler/tf2xla/xla_compiler.cc: "Detected unsupported operations when
  trying to compile graph ...").
- A program of scalar elementwise operations only, without side effects, runs on the
  host without a Poplar engine, so there is nothing to serialize
  (compiler/plugin/poplar/driver/poplar_compiler.cc `AreAllScalarElementwiseGraph`;
  poplar_executable.cc: "Cannot serialize a scalar elementwise graph").
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops

# Ops of the program's graph that are not computation (its inputs, outputs, ordering).
_STRUCTURE = frozenset({"Placeholder", "Identity", "NoOp", "Const"})
# Ops that call functions or loop: never elementwise.
_NOT_ELEMENTWISE = frozenset(
    {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"}
    | {"PartitionedCall", "StatefulPartitionedCall"}
)


def check(graph: ops.Graph, name: str, has_streams: bool) -> None:
    """Raises the original's error if the program `graph` cannot become an executable."""
    for op in graph.get_operations():
        if any(t.dtype == tf.float64 for t in (*op.inputs, *op.outputs)):
            raise tf.errors.InvalidArgumentError(
                None,
                None,
                f"Detected unsupported operations when trying to compile graph {name} on "
                f"XLA_IPU_JIT: {op.type} (no {op.type} kernel for float64 on the IPU, which "
                f"has no 64-bit floating point; node {op.name})",
            )
    if not has_streams and _scalar_elementwise(graph):
        raise tf.errors.FailedPreconditionError(
            None, None, "Cannot serialize a scalar elementwise graph"
        )


def _scalar_elementwise(graph: ops.Graph) -> bool:
    """Whether every op of `graph` computes scalars elementwise, with no side effect."""
    computing = False
    for op in graph.get_operations():
        tensors = (*op.inputs, *op.outputs)
        if any(t.shape.rank != 0 for t in tensors if t.dtype != tf.resource):
            return False
        if any(t.dtype == tf.resource for t in tensors):
            return False  # a variable: its updates are side effects
        if op.type in _STRUCTURE:
            continue
        if op.type in _NOT_ELEMENTWISE or op._is_stateful:  # noqa: SLF001
            return False
        computing = True
    return computing
