"""Deciding whether a compiled region runs under XLA or as a plain TensorFlow graph.

Both run on the host and give the same numbers (up to floating-point
rounding). XLA is faster for most programs, but not all: on a CPU,
convolutions run slower under XLA than under TensorFlow's own kernels, and a
region holding an operation XLA cannot compile (a dataset iterator, a host
print, a Python function) must run as a graph.

`OPENIPU_COMPILE=xla|graph|onnxruntime|auto` forces the choice (default `auto`;
`onnxruntime` applies to the programs a front end holds as ONNX models, which
otherwise run on whichever of onnxruntime and TensorFlow is faster).
"""

from __future__ import annotations

import enum
import functools
import os
from collections.abc import Iterable, Mapping

from tensorflow.core.framework import attr_value_pb2, function_pb2, types_pb2
from tensorflow.python.framework import ops
from tensorflow.python.util import pywrap_xla_ops

from openipu._src.engine import xla_cache_room

COMPILE_MODE_ENV = "OPENIPU_COMPILE"

# Ops that XLA compiles, but slower than TensorFlow's kernels on a CPU.
_SLOWER_UNDER_XLA_ON_CPU = frozenset(
    {
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "Conv3DBackpropInputV2",
        "Conv3DBackpropFilterV2",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
        "MaxPoolGrad",
        "AvgPoolGrad",
    }
)

# Ops with no XLA kernel that XLA still handles: TF1 control flow is turned into
# functional control flow before compilation; the others are no-ops there.
_IGNORED = frozenset(
    {
        "Placeholder",
        "VarHandleOp",
        "NoOp",
        "Enter",
        "Exit",
        "LoopCond",
        "Merge",
        "NextIteration",
        "Switch",
        "ControlTrigger",
    }
)


# Collectives between processes (multi-worker strategies). XLA has kernels for some, but
# they would reduce within the compiled program only; as an IPU program moves its
# inter-host all-reduce to the host, a region holding one runs as a graph.
_BETWEEN_PROCESSES = frozenset(
    {
        "CollectiveReduce",
        "CollectiveReduceV2",
        "CollectiveReduceV3",
        "CollectiveGather",
        "CollectiveGatherV2",
        "CollectiveBcastSend",
        "CollectiveBcastRecv",
        "CollectiveBcastSendV2",
        "CollectiveBcastRecvV2",
        "CollectiveAllToAllV2",
        "CollectiveAllToAllV3",
        "CollectiveReduceScatterV2",
        "CollectiveAssignGroupV2",
        "CollectiveInitializeCommunicator",
    }
)


class CompileMode(enum.Enum):
    XLA = "xla"
    GRAPH = "graph"
    # Programs a front end holds as an ONNX model (PopART inference) may run on
    # onnxruntime instead, when that is faster (`engine/onnx_runtime_program.py`).
    ONNX_RUNTIME = "onnxruntime"


@functools.cache
def xla_op_types() -> frozenset[str]:
    return frozenset(pywrap_xla_ops.get_cpu_kernel_names())


def forced_mode() -> CompileMode | None:
    raw = os.environ.get(COMPILE_MODE_ENV, "auto").strip().lower()
    if raw in ("", "auto"):
        return None
    try:
        return CompileMode(raw)
    except ValueError:
        raise ValueError(
            f"{COMPILE_MODE_ENV}={raw!r} is not one of 'xla', 'graph', 'onnxruntime', 'auto'"
        ) from None


def _preferred_mode(
    graph: ops.Graph,
    operations: Iterable[ops.Operation],
    requested: CompileMode | None,
) -> CompileMode:
    op_types = _op_types_with_called_functions(graph, operations)
    forced = forced_mode() or requested
    if forced is CompileMode.ONNX_RUNTIME:
        forced = None  # for programs held as ONNX models only; regions choose as usual
    unsupported = (op_types - xla_op_types() - _IGNORED) | (op_types & _BETWEEN_PROCESSES)
    if unsupported:
        return CompileMode.GRAPH
    if forced is not None:
        return forced
    if op_types & _SLOWER_UNDER_XLA_ON_CPU:
        return CompileMode.GRAPH
    return CompileMode.XLA


def choose_mode(
    graph: ops.Graph,
    operations: Iterable[ops.Operation],
    requested: CompileMode | None = None,
) -> CompileMode:
    """Picks how to run a region made of `operations` (and the functions they call).

    `requested` (a caller's measured choice) wins over the heuristics, the
    environment variable wins over both, and XLA is never picked when it cannot
    compile the region, nor once the process cannot hold another XLA executable
    (`xla_cache_room`: TensorFlow never frees them).
    """
    mode = _preferred_mode(graph, operations, requested)
    if mode is CompileMode.XLA and not xla_cache_room.has_room():
        return CompileMode.GRAPH
    return mode


def would_choose_xla(graph: ops.Graph, operations: Iterable[ops.Operation]) -> bool:
    """Whether a region of `operations` built as a graph on request would get XLA if it
    asked for nothing (no op XLA cannot compile, none it runs slower)."""
    return _preferred_mode(graph, operations, None) is CompileMode.XLA


def unsupported_by_xla(graph: ops.Graph, operations: Iterable[ops.Operation]) -> set[str]:
    """The op types in `operations` (and the functions they call) that XLA cannot compile."""
    op_types = _op_types_with_called_functions(graph, operations)
    return set((op_types - xla_op_types() - _IGNORED) | (op_types & _BETWEEN_PROCESSES))


def _op_types_with_called_functions(
    graph: ops.Graph, operations: Iterable[ops.Operation]
) -> frozenset[str]:
    types: set[str] = set()
    seen_functions: set[str] = set()
    pending: list[str] = []
    for op in operations:
        types.add(op.type)
        if _uses_strings(op.type, op.node_def.attr):
            types.add(STRING_TENSORS)
        pending.extend(_called_function_names(op.node_def.attr))
    while pending:
        name = pending.pop()
        if name in seen_functions:
            continue
        seen_functions.add(name)
        definition = _function_definition(graph, name)
        if definition is None:
            continue
        for node in definition.node_def:
            types.add(node.op)
            if _uses_strings(node.op, node.attr):
                types.add(STRING_TENSORS)
            pending.extend(_called_function_names(node.attr))
            # A call to a library function appears as an op named after it.
            if _function_definition(graph, node.op) is not None:
                pending.append(node.op)
    return frozenset(types)


# Not an op type: marks a region computing on string tensors, which XLA cannot hold (a
# serving signature's preprocessing of strings) whatever the op types involved. Assert
# messages are strings XLA drops with their asserts.
STRING_TENSORS = "<string tensors>"
_STRINGS_XLA_DROPS = frozenset({"Const", "Assert"})


def _uses_strings(op_type: str, attrs: Mapping[str, attr_value_pb2.AttrValue]) -> bool:
    if op_type in _STRINGS_XLA_DROPS:
        return False
    return any(
        value.type == types_pb2.DT_STRING or types_pb2.DT_STRING in value.list.type
        for value in attrs.values()
    )


def _called_function_names(attrs: Mapping[str, attr_value_pb2.AttrValue]) -> list[str]:
    names = []
    for value in attrs.values():
        if value.HasField("func"):
            names.append(value.func.name)
        elif value.HasField("list"):
            names.extend(f.name for f in value.list.func)
    return names


def _function_definition(graph: ops.Graph, name: str) -> function_pb2.FunctionDef | None:
    while graph is not None:
        function = graph._get_function(name)  # noqa: SLF001 - no public lookup exists
        if function is not None:
            return function.definition
        graph = getattr(graph, "outer_graph", None)
    return None
