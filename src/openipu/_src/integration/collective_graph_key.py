"""Which runs of a distributed TF1 session must declare a collective graph key.

Used by the `Session.run` patch (`session_run.py`), TensorFlow 2.21.

Why: a multi-worker pipeline's gradient all-reduce runs inside the function of its
repeat loop (a `While` body). TensorFlow's master looks for collectives only among the
run graph's own nodes (and for the first version of those operations, in the functions
those nodes call directly); it misses the second-version collectives of a loop body,
runs the step without a collective graph key, and the workers then have no collective
executor ("Failed to get CollectiveExecutor"). Local sessions lower the loops before
they look and find them. So a gRPC session's run declares
`RunOptions.experimental.collective_graph_key` itself, but only when the run executes
such a function: the key names a step-id sequence that every worker advances on each
run that declares it, and a run executing no collective (a chief-only checkpoint, a
weight read) must not advance one worker's sequence past the others'. TensorFlow decides
its own key the same way, from the run's pruned graph
(tensorflow/core/common_runtime/graph_execution_state.cc).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import tensorflow as tf
from tensorflow.python.util import nest

#: Any non-zero key: the collectives inside the functions are of the second version, whose
#: instances are told apart by their own keys, not by the graph's. One value for every
#: graph, so that every worker's graph declares the same key.
COLLECTIVE_GRAPH_KEY = 0x49505543
#: Attributes by which an operation calls a function (While, If, Case, PartitionedCall).
_FUNCTION_ATTRIBUTES = ("f", "body", "cond", "then_branch", "else_branch", "branches")


class _GraphScan:
    """A graph's operations that call a function holding a collective, at one version."""

    def __init__(self, graph: tf.Graph) -> None:
        self.version = graph.version
        holding = _functions_holding_collectives(graph)
        self.callers = frozenset(
            op.name for op in graph.get_operations() if _calls_any(op.node_def, holding)
        )
        self.runs: dict[tuple, bool] = {}


_scans: weakref.WeakKeyDictionary[tf.Graph, _GraphScan] = weakref.WeakKeyDictionary()


def run_needs_key(graph: tf.Graph, fetches: Any, feed_dict: Any) -> bool:
    """Whether a run of `fetches` executes a function that holds a collective."""
    scan = _scans.get(graph)
    if scan is None or scan.version != graph.version:
        scan = _GraphScan(graph)
        _scans[graph] = scan
    if not scan.callers:
        return False
    try:
        targets = _fetched_operations(graph, fetches)
        fed = _fed_tensor_names(graph, feed_dict)
    except Exception:  # noqa: BLE001 - the stock run reports bad fetches and feeds
        return False
    key = (frozenset(targets), frozenset(fed))
    known = scan.runs.get(key)
    if known is None:
        known = _reaches(graph, targets, fed, scan.callers)
        scan.runs[key] = known
    return known


def _functions_holding_collectives(graph: tf.Graph) -> set[str]:
    """Names of the graph's functions whose bodies run a collective, directly or by a call."""
    bodies = {}
    for name, function in list(graph._functions.items()):  # noqa: SLF001
        definition = getattr(function, "cached_definition", None) or function.definition
        bodies[name] = list(definition.node_def)
    holding = {
        name
        for name, nodes in bodies.items()
        if any(node.op.startswith("Collective") for node in nodes)
    }
    changed = True
    while changed:  # callers of holding functions hold collectives too
        changed = False
        for name, nodes in bodies.items():
            if name not in holding and any(_calls_any(node, holding) for node in nodes):
                holding.add(name)
                changed = True
    return holding


def _calls_any(node_def, functions: set[str]) -> bool:
    if not functions:
        return False
    if node_def.op in functions:
        return True
    for attribute in _FUNCTION_ATTRIBUTES:
        if attribute not in node_def.attr:
            continue
        value = node_def.attr[attribute]
        if value.func.name in functions:
            return True
        if any(function.name in functions for function in value.list.func):
            return True
    return False


def _fetched_operations(graph: tf.Graph, fetches: Any) -> set[str]:
    names = set()
    for item in nest.flatten(fetches, expand_composites=True):
        if item is None:
            continue
        element = graph.as_graph_element(item, allow_tensor=True, allow_operation=True)
        operation = element if isinstance(element, tf.Operation) else element.op
        names.add(operation.name)
    return names


def _fed_tensor_names(graph: tf.Graph, feed_dict: Any) -> set[str]:
    if not feed_dict:
        return set()
    names = set()
    for key in nest.flatten(list(feed_dict), expand_composites=True):
        try:
            names.add(graph.as_graph_element(key, allow_tensor=True, allow_operation=False).name)
        except (TypeError, ValueError, KeyError):
            continue  # a key the stock run expands itself; its producers are kept
    return names


def _reaches(graph: tf.Graph, targets: Iterable[str], fed: frozenset[str] | set[str], callers):
    """Whether the operations `targets` need (fed tensors cut the graph) include a caller."""
    seen: set[str] = set()
    pending = [graph.get_operation_by_name(name) for name in targets]
    while pending:
        operation = pending.pop()
        if operation.name in seen:
            continue
        seen.add(operation.name)
        if operation.name in callers:
            return True
        pending.extend(t.op for t in operation.inputs if t.name not in fed)
        pending.extend(operation.control_inputs)
    return False
