"""Lowering of ONNX graphs (and subgraphs, and functions) to evaluable bodies of op lowerings."""

from __future__ import annotations

import contextlib
import functools
from collections import ChainMap
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import onnx
import tensorflow as tf

from openipu._src.popart.errors import LoweringError, UnsupportedOpError
from openipu._src.popart.external_data import initializer_array
from openipu._src.popart.lowering import stochastic_rounding
from openipu._src.popart.lowering.channels_last import ChannelsLastValues
from openipu._src.popart.lowering.op import (
    Op,
    RunContext,
    as_outputs,
    onnx_schema,
    sparse_to_dense,
    static_value,
)
from openipu._src.popart.lowering.registry import GRAPHCORE_DOMAIN, canonical_domain, find_op

Scope = ChainMap  # tensor name -> value; a subgraph's scope is a child of its parent's

# Inputs larger than this are not constant-folded: folding exists for shape arithmetic.
_MAX_FOLDED_ELEMENTS = 1 << 16


class Body:
    """A lowered graph, subgraph or function body: its ops in execution order."""

    def __init__(
        self,
        name: str,
        input_names: Sequence[str],
        output_names: Sequence[str],
        constants: dict[str, np.ndarray],
        ops: list[Op],
    ) -> None:
        self.name = name
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.constants = constants
        self.ops = ops

    def non_compilable_ops(self) -> list[str]:
        """'op_type (node name)' for every op, nested ones included, that XLA cannot compile."""
        found = []
        for op in self.ops:
            if not op.compilable:
                found.append(f"{op.node.op_type} ({op.name})")
            for subgraph in op_bodies(op):
                found.extend(subgraph.non_compilable_ops())
        return found

    def evaluate(self, context: RunContext, scope: Scope) -> Scope:
        """Run every op, adding the values it produces to ``scope`` (which is returned)."""
        for name, array in self.constants.items():
            if name not in scope.maps[0]:
                scope[name] = tf.constant(array)
        layouts = ChannelsLastValues()
        for op in self.ops:
            arguments = [lookup(scope, name, op) if name else None for name in op.node.input]
            context.scope = scope
            placed = context.op_scope(op) if context.op_scope is not None else None
            with placed or contextlib.nullcontext():
                if stochastic_rounding.applies(op, context, arguments):
                    results = stochastic_rounding.run_wide(
                        functools.partial(run_op, op, context), op, context, arguments
                    )
                else:
                    results = run_op(op, context, arguments, layouts)
            for name, value in zip(op.node.output, results, strict=False):
                if name:
                    scope[name] = value
        return scope

    def call(
        self,
        context: RunContext,
        outer: Scope,
        inputs: Sequence[Any],
        missing_outputs_ok: bool = False,
    ) -> list[Any]:
        """Evaluate as a subgraph: bind ``inputs`` to its inputs and return its outputs.

        With ``missing_outputs_ok`` an output the body did not produce (a function's optional
        output) is None instead of an error.
        """
        scope = outer.new_child()
        inputs = list(inputs) + [None] * (len(self.input_names) - len(inputs))
        for name, value in zip(self.input_names, inputs, strict=False):
            if name:
                scope[name] = value
        self.evaluate(context, scope)
        if missing_outputs_ok:
            return [scope.get(name) for name in self.output_names]
        return [lookup(scope, name, None) for name in self.output_names]


def op_bodies(op: Op) -> Iterable[Body]:
    yield from op.subgraphs.values()
    yield from getattr(op, "extra_bodies", ())


def lookup(scope: Scope, name: str, op: Op | None) -> Any:
    try:
        return scope[name]
    except KeyError:
        where = f"node '{op.name}' ({op.node.op_type})" if op is not None else "graph output"
        raise LoweringError(f"Tensor '{name}' used by {where} is not defined") from None


def run_op(
    op: Op,
    context: RunContext,
    arguments: list[Any],
    layouts: ChannelsLastValues | None = None,
) -> tuple[Any, ...]:
    folded = _constant_folded(op, context, arguments)
    if folded is not None:
        return folded
    if layouts is not None:
        results = layouts.run(op, context, op.node.input, arguments)
        if results is not None:
            return results
    return as_outputs(op.run(context, arguments))


def _constant_folded(op: Op, context: RunContext, arguments: list[Any]) -> tuple[Any, ...] | None:
    """While tracing, evaluate ops whose inputs are all constants eagerly.

    Shape arithmetic (Shape -> Gather -> Concat -> Reshape) then yields constants, which the ops
    that need static values (Reshape under XLA, Slice, Pad, TopK...) can read.
    """
    if tf.executing_eagerly() or op.stateful or op.subgraphs or not arguments:
        return None
    values: list[np.ndarray | None] = []
    for argument in arguments:
        if argument is None:
            values.append(None)
            continue
        if not isinstance(argument, tf.Tensor):
            return None
        value = static_value(argument)
        if value is None or np.size(value) > _MAX_FOLDED_ELEMENTS:
            return None
        values.append(value)
    with tf.init_scope():
        eager_arguments = [
            None if value is None else tf.constant(value, dtype=argument.dtype)
            for value, argument in zip(values, arguments, strict=True)
        ]
        results = as_outputs(op.run(context, eager_arguments))
        numpy_results = [
            result.numpy() if isinstance(result, tf.Tensor) else result for result in results
        ]
    return tuple(
        tf.constant(value, dtype=result.dtype) if isinstance(result, tf.Tensor) else value
        for value, result in zip(numpy_results, results, strict=True)
    )


class Lowerer:
    """Lowers the graphs of one model, which fixes the opset of each domain."""

    def __init__(
        self,
        opsets: dict[str, int],
        functions: dict[tuple[str, str], onnx.FunctionProto] | None = None,
    ) -> None:
        self.opsets = {canonical_domain(domain): version for domain, version in opsets.items()}
        self.functions = functions or {}

    def opset_version(self, domain: str, node: onnx.NodeProto) -> int:
        domain = canonical_domain(domain)
        if domain in self.opsets:
            return self.opsets[domain]
        if domain == GRAPHCORE_DOMAIN:
            return 1  # PopART's only version; builders sometimes omit the import
        raise LoweringError(
            f"Node '{node.name}' ({node.op_type}) is in domain '{domain}', which the model "
            "does not import an opset for"
        )

    def lower_graph(self, graph: onnx.GraphProto, check_names: bool = True) -> Body:
        constants = {tensor.name: initializer_array(tensor) for tensor in graph.initializer}
        for sparse in graph.sparse_initializer:
            constants[sparse.values.name] = sparse_to_dense(sparse)
        input_names = [value.name for value in graph.input]
        if check_names:
            _check_defined_before_use(graph, set(input_names) | set(constants))
        ops = [self.lower_node(node) for node in graph.node]
        for op in ops:
            op.link(ops)
        output_names = [value.name for value in graph.output]
        return Body(graph.name, input_names, output_names, constants, ops)

    def lower_subgraph(self, graph: onnx.GraphProto, owner: Op) -> Body:
        # A subgraph may use any value of its enclosing scopes, so names are checked at run time.
        return self.lower_graph(graph, check_names=False)

    def lower_node(self, node: onnx.NodeProto) -> Op:
        domain = canonical_domain(node.domain)
        local_function = self.functions.get((domain, node.op_type))
        if local_function is not None:
            # import cycle: functions imports this module
            from openipu._src.popart.lowering.functions import FunctionOp

            return FunctionOp(node, self, local_function)
        version = self.opset_version(domain, node)
        found = find_op(domain, node.op_type, version)
        if found is not None:
            return found[1](node, version, self)
        schema = onnx_schema(node.op_type, version, domain)
        # onnx's stubs omit OpSchema's function accessors (onnx ignores them the same way).
        if schema is not None and (schema.has_function or schema.has_context_dependent_function):  # type: ignore[attr-defined]
            # import cycle: functions imports this module
            from openipu._src.popart.lowering.functions import FunctionOp

            return FunctionOp(node, self, None, schema=schema, version=version)
        raise UnsupportedOpError(
            f"Unsupported op '{node.op_type}' (domain '{domain or 'ai.onnx'}', opset version "
            f"{version}) at node '{node.name or node.output[0] if node.output else ''}': "
            "no lowering is registered and the ONNX schema defines no function body"
        )


def _check_defined_before_use(graph: onnx.GraphProto, defined: set[str]) -> None:
    defined = set(defined)
    for node in graph.node:
        for name in node.input:
            if name and name not in defined:
                raise LoweringError(
                    f"Node '{node.name}' ({node.op_type}) uses tensor '{name}', which no graph "
                    "input, initializer or earlier node defines (nodes must be topologically "
                    "sorted)"
                )
        defined.update(name for name in node.output if name)
    for value in graph.output:
        if value.name not in defined:
            raise LoweringError(f"Graph output '{value.name}' is not produced by the graph")
