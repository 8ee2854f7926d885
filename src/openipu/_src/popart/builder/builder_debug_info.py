"""The debug info the original's Builder makes for each op and input it adds.

Every op method makes a `BuilderDebugInfo` (layer "popartbuilder") and stores its id in the
node as the attribute `__debug_info_id`; addInputTensor and addInitializedInputTensor make a
`BuilderVarDebugInfo` and store its id in the model's metadata under
`__debug_id/input/<tensor id>` (willow/src/builder.cpp, builder.gen.cpp, builder_impl.cpp,
builderdebuginfo.cpp). The ids come from the one counter of all debug infos.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, helper

from openipu._src.popart.builder.graph_walk import iter_nodes
from openipu._src.popart.utility.debug_context import DebugContext, DebugInfo

DEBUG_INFO_ID = "__debug_info_id"  # willow/include/popart/names.hpp, sDebugInfoId
INPUT_DEBUG_ID_PREFIX = "__debug_id/input/"  # names.hpp, onnxDebugIdInputMetaDataKey


def _context(debug_context: Any) -> DebugContext:
    if isinstance(debug_context, DebugContext):
        return debug_context
    return DebugContext(str(debug_context or ""))


def op_debug_info_id(
    debug_context: Any, api: str, inputs: Sequence[str], attributes: Sequence[AttributeProto]
) -> int:
    """A new op's BuilderDebugInfo: its api, inputs and attributes (as text)."""
    info = DebugInfo(_context(debug_context), "popartbuilder")
    info.setValue("category", "api")
    info.setValue("api", api)
    if inputs:
        info.setValue("inputs", list(inputs))
    info.setValue(
        "attributes",
        {a.name: str(helper.get_attribute_value(a)) for a in attributes},
    )
    return info.getId()


def variable_debug_info_id(debug_context: Any, api: str, tensor_id: str) -> int:
    """A new graph input's BuilderVarDebugInfo."""
    info = DebugInfo(_context(debug_context), "popartbuilder")
    info.setValue("category", "variable")
    info.setValue("api", api)
    info.setValue("tensorId", tensor_id)
    return info.getId()


def insert_debug_info_id(node: NodeProto, debug_id: int) -> None:
    """Adds the id among the node's own attributes where it sorts, as the original's op
    methods insert it into their (name-ordered) attribute map."""
    attribute = helper.make_attribute(DEBUG_INFO_ID, debug_id)
    position = next(
        (i for i, a in enumerate(node.attribute) if a.name > DEBUG_INFO_ID), len(node.attribute)
    )
    node.attribute.insert(position, attribute)


def _strip_attributes(graph: GraphProto, strip: Any) -> None:
    for node in iter_nodes(graph):
        kept = [a for a in node.attribute if not strip(a.name)]
        if len(kept) != len(node.attribute):
            del node.attribute[:]
            node.attribute.extend(kept)


def strip_debug_ids(model: ModelProto) -> None:
    """Removes the builder's debug ids (in place): two builds of one model differ only in
    them, as the ids come from a counter of the whole process."""
    _strip_attributes(model.graph, lambda name: name == DEBUG_INFO_ID)
    kept = [e for e in model.metadata_props if not e.key.startswith(INPUT_DEBUG_ID_PREFIX)]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)


def strip_internal_attributes(graph: GraphProto) -> None:
    """Removes PopART's own node attributes ('__' names, in place), which ONNX's checker lets
    any node carry (onnx/defs/schema.cc, isInternalSymbol) but other runtimes refuse, as
    onnxruntime's Constant does."""
    _strip_attributes(graph, lambda name: name.startswith("__"))
