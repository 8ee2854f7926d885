"""`SessionOptions.strictOpVersions`: every ai.onnx op runs exactly the version its opset names.

The original (willow/src/opmanager.cpp, checkOpVersionAgainstOpset) looks up, for each ai.onnx
node, the op version the ONNX spec stipulates for the model's opset, and throws when the newest
version it implements at or below that opset is another one; an opset missing from its table
(willow/src/opsets.gen.hpp: ai.onnx 6 to 11) fails the same lookup (willow/src/opsets.cpp,
getOpid). With the check off, an op falls back to the newest implementation, as the lowering
registry does anyway. Here the table is the ONNX opsets from the original's oldest (6) to the
newest the installed onnx defines, and the implemented versions are the lowering registry's.
A newer version that differs from an implemented one only in the element types it accepts
(same attributes, defaults, inputs and outputs; types added or removed) is the same operator on
the types they share, so it counts as implemented; a type the lowering cannot handle is refused
when it is lowered. A version bump with the same types and signature changed the semantics.
"""

from __future__ import annotations

import onnx
from onnx import ModelProto, NodeProto

from openipu._src.popart.builder.graph_walk import iter_nodes
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.lowering.registry import find_op

# The oldest ai.onnx opset of the original's table (willow/src/opsets.gen.hpp).
OLDEST_STRICT_OPSET = 6
_DISABLE_HINT = (
    "This check may be disabled by setting popart::SessionOptions::strictOpVersions to false."
)


def check_op_versions(model: ModelProto) -> None:
    """Raises a popart_exception unless every ai.onnx node's spec version is implemented."""
    opset = _ai_onnx_opset(model)
    if opset is None:
        return
    newest = onnx.defs.onnx_opset_version()
    if not OLDEST_STRICT_OPSET <= opset <= newest:
        raise popart_exception(
            f"Could not find domain and version ai.onnx {opset} in opsets: the ai.onnx opsets "
            f"a session runs are {OLDEST_STRICT_OPSET} to {newest}. {_DISABLE_HINT}"
        )
    local_functions = {(function.domain, function.name) for function in model.functions}
    for node in iter_nodes(model.graph):
        if node.domain not in ("", "ai.onnx") or ("", node.op_type) in local_functions:
            continue
        _check_node(node, opset)


def _ai_onnx_opset(model: ModelProto) -> int | None:
    versions = [entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")]
    return max(versions) if versions else None


def _check_node(node: NodeProto, opset: int) -> None:
    try:
        stipulated = onnx.defs.get_schema(node.op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        return  # not an ONNX op: the checker has refused it already
    implemented = find_op("", node.op_type, opset)
    if implemented is None:
        return  # expanded from the schema's function body (exact), or refused by the lowering
    if implemented[0] != stipulated and not _only_changes_types(
        node.op_type, implemented[0], opset
    ):
        raise popart_exception(
            f"For an opset {opset} Model, the ONNX spec stipulates that a {node.op_type} op "
            f"must be version {stipulated}. The highest version we have implemented less than "
            f"or equal to {opset} is {implemented[0]}, so bailing (node '{node.name}'). "
            f"{_DISABLE_HINT}"
        )


def _only_changes_types(op_type: str, implemented: int, opset: int) -> bool:
    """Whether the op's schema at `opset` is the implemented one with other element types."""
    old = onnx.defs.get_schema(op_type, implemented, "")
    new = onnx.defs.get_schema(op_type, opset, "")
    if _signature(old) != _signature(new):
        return False
    old_types = {c.type_param_str: set(c.allowed_type_strs) for c in old.type_constraints}
    new_types = {c.type_param_str: set(c.allowed_type_strs) for c in new.type_constraints}
    return old_types.keys() == new_types.keys() and old_types != new_types


def _signature(schema: onnx.defs.OpSchema) -> tuple[object, ...]:
    attributes = sorted(
        (name, attribute.type, attribute.required, attribute.default_value.SerializeToString())
        for name, attribute in schema.attributes.items()
    )
    inputs = [(each.name, each.option, each.type_str) for each in schema.inputs]
    outputs = [(each.name, each.option, each.type_str) for each in schema.outputs]
    return attributes, inputs, outputs
