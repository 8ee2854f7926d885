"""Ops lowered by inlining a function body: model-local functions and ONNX schema functions.

ONNX defines many ops (Celu, LayerNormalization, Gelu, ...) as functions of simpler ops. An op
with no registered lowering whose schema has such a body is lowered through that body.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Sequence
from typing import Any

import onnx
import tensorflow as tf
from onnx import AttributeProto

from openipu._src.popart.lowering.dtypes import onnx_elem_type
from openipu._src.popart.lowering.graph import Body, Lowerer
from openipu._src.popart.lowering.op import Attributes, Op, RunContext


def bind_attribute_references(
    nodes: Sequence[onnx.NodeProto], values: dict[str, AttributeProto]
) -> list[onnx.NodeProto]:
    """Copies of ``nodes`` whose attribute references (``ref_attr_name``) take the caller's values.

    A reference to an attribute the caller did not set is dropped, so the schema default applies.
    """
    bound = []
    for node in nodes:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        del copy.attribute[:]
        for attribute in node.attribute:
            if attribute.ref_attr_name:
                value = values.get(attribute.ref_attr_name)
                if value is None:
                    continue
                replacement = AttributeProto()
                replacement.CopyFrom(value)
                replacement.name = attribute.name
                copy.attribute.append(replacement)
            elif attribute.type == AttributeProto.GRAPH:
                replacement = AttributeProto()
                replacement.CopyFrom(attribute)
                del replacement.g.node[:]
                replacement.g.node.extend(bind_attribute_references(attribute.g.node, values))
                copy.attribute.append(replacement)
            else:
                copy.attribute.append(attribute)
        bound.append(copy)
    return bound


def parse_function(serialized: bytes | onnx.FunctionProto) -> onnx.FunctionProto:
    if isinstance(serialized, onnx.FunctionProto):
        return serialized
    function = onnx.FunctionProto()
    function.ParseFromString(serialized)
    return function


def schema_function(schema: onnx.defs.OpSchema, version: int) -> onnx.FunctionProto:
    """The schema's function body for the newest function opset not above ``version``."""
    # onnx's stubs omit OpSchema's function accessors (onnx ignores them the same way).
    candidates = [v for v in schema.function_opset_versions if v <= version]  # type: ignore[attr-defined]
    if not candidates:
        return schema.function_body
    return parse_function(schema.get_function_with_opset_version(max(candidates)))  # type: ignore[attr-defined]


def describe_type(value: Any) -> onnx.TypeProto:
    """The ONNX type of a runtime value, as context-dependent function builders need it."""
    if isinstance(value, tf.Tensor):
        rank = value.shape.rank
        shape = None if rank is None else [None] * rank
        return onnx.helper.make_tensor_type_proto(onnx_elem_type(value.dtype), shape)
    if isinstance(value, list):
        element = value[0] if value else tf.zeros([0])
        return onnx.helper.make_sequence_type_proto(describe_type(element))
    # An absent optional input: its type does not shape the body.
    return onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, None)


class FunctionOp(Op):
    """A node lowered through a function body, inlined in its own scope."""

    def __init__(
        self,
        node: onnx.NodeProto,
        lowerer: Lowerer,
        function: onnx.FunctionProto | None,
        schema: onnx.defs.OpSchema | None = None,
        version: int = 0,
    ) -> None:
        self.node = node
        self.name = node.name or (node.output[0] if node.output else node.op_type)
        self.key = f"{node.op_type}:{node.name}:{','.join(node.output)}"
        self.domain = node.domain
        self.op_type = node.op_type
        self.opset_version = version
        self.lowerer = lowerer
        self.subgraphs = {}
        self.schema = schema
        self.extra_bodies: list[Body] = []
        self._bodies_by_input_types: dict[tuple, Body] = {}
        self._body: Body | None
        if function is not None:
            self.attrs = Attributes()
            self._body = self._lower_function(function)
        else:
            assert schema is not None, "a FunctionOp lowers a local function or a schema's"
            self.attrs = self._resolve_attributes(node, version)
            self._body = (
                self._lower_function(schema_function(schema, version))
                if schema.has_function  # type: ignore[attr-defined]  # missing from onnx's stubs
                else None
            )
        if self._body is not None:
            self.extra_bodies.append(self._body)

    @property
    def compilable(self) -> bool:  # type: ignore[override]
        return all(not body.non_compilable_ops() for body in self.extra_bodies)

    @property
    def stateful(self) -> bool:  # type: ignore[override]
        return any(op.stateful for body in self.extra_bodies for op in body.ops)

    def _lower_function(self, function: onnx.FunctionProto) -> Body:
        values = {}
        if self.schema is not None:
            for name, spec in self.schema.attributes.items():
                if spec.default_value.type != AttributeProto.UNDEFINED:
                    values[name] = spec.default_value
        values.update({attribute.name: attribute for attribute in function.attribute_proto})
        values.update({attribute.name: attribute for attribute in self.node.attribute})
        nodes = bind_attribute_references(function.node, values)
        opsets = dict(self.lowerer.opsets)
        opsets.update({entry.domain: entry.version for entry in function.opset_import})
        inner = Lowerer(opsets, self.lowerer.functions)
        ops = [inner.lower_node(node) for node in nodes]
        if self.schema is not None:
            for op in ops:
                # ONNX writes its schemas' function bodies for ONNX's semantics (a Scan
                # in one stacks its outputs, where PopART's ScanOp concatenates them).
                op.onnx_semantics = True
        return Body(function.name, function.input, function.output, {}, ops)

    def _context_dependent_body(self, inputs: Sequence[Any]) -> Body:
        # The body depends on the input types, known only when the inputs arrive.
        signature = tuple(describe_type(value).SerializeToString() for value in inputs)
        body = self._bodies_by_input_types.get(signature)
        if body is None:
            input_types = [describe_type(value) for value in inputs]
            assert self.schema is not None  # only schema functions lack a fixed body
            serialized = self.schema.get_context_dependent_function_with_opset_version(  # type: ignore[attr-defined]  # missing from onnx's stubs
                self.opset_version,
                self.node.SerializeToString(),
                [type_proto.SerializeToString() for type_proto in input_types],
            )
            body = self._lower_function(parse_function(serialized))
            self._bodies_by_input_types[signature] = body
        return body

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        body = self._body if self._body is not None else self._context_dependent_body(inputs)
        # A function sees only its own inputs, never the caller's scope.
        outputs = body.call(context, ChainMap(), inputs, missing_outputs_ok=True)
        return tuple(outputs)
