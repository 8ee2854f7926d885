"""The ONNX model a session runs: read from bytes, a ModelProto or a file, and checked.

Besides the builder's checks (a parsable, valid ONNX model), a session needs one version of
each operator set: PopART refuses a model that imports two versions of ai.onnx (once as ""
and once as "ai.onnx").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import ModelProto

from openipu._src.popart.builder.graph_walk import iter_graphs
from openipu._src.popart.builder.model_io import load_model
from openipu._src.popart.errors import popart_exception

_DEFAULT_DOMAIN = "ai.onnx"


@dataclass
class ModelSource:
    """A checked model, and where its externally saved initializers live (by tensor id)."""

    model: ModelProto
    external_locations: dict[str, str] = field(default_factory=dict)


def read_model(model_or_filename: Any) -> ModelSource:
    """The model of a session's `fnModel` (serialized bytes, a ModelProto or a file name)."""
    model = load_model(model_or_filename, refuse_unsupported)
    check_opsets(model)
    if isinstance(model_or_filename, (str, os.PathLike)):
        locations = _external_locations(
            onnx.load_model(model_or_filename, load_external_data=False)
        )
    else:
        # Serialized bytes or a ModelProto name their data files by absolute path (as
        # Builder.saveInitializersExternally writes them); modelToHost writes the trained
        # weights back there (external_tensorproto_data_test.py,
        # test_save_back_externally_saved_tensors).
        locations = {
            name: location
            for name, location in _external_locations(model).items()
            if os.path.isabs(location)
        }
    return ModelSource(model, locations)


def refuse_unsupported(model: ModelProto) -> None:
    """What the original's IR refuses before checking anything else (constant folding of
    a sparse Constant: willow/src/ces/onnxconstexpr.cpp)."""
    for graph in iter_graphs(model.graph):
        for node in graph.node:
            if node.op_type == "Constant" and any(a.name == "sparse_value" for a in node.attribute):
                raise popart_exception("The Constant op attribute 'sparse_value' is not supported.")


def check_opsets(model: ModelProto) -> dict[str, int]:
    """One version per operator-set domain ("" and "ai.onnx" are the same domain)."""
    versions: dict[str, int] = {}
    for entry in model.opset_import:
        domain = entry.domain or _DEFAULT_DOMAIN
        known = versions.get(domain)
        if known is not None and known != entry.version:
            raise popart_exception(
                f"The model imports {domain} opset versions {known} and {entry.version}: a model "
                "can use only one version of an operator set (mixing ai.onnx opsets is not "
                "supported)"
            )
        versions[domain] = entry.version
    return versions


def _external_locations(header: ModelProto) -> dict[str, str]:
    """The data file of each initializer of the main graph kept in one (by tensor id)."""
    locations = {}
    for tensor in header.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            entries = {entry.key: entry.value for entry in tensor.external_data}
            locations[tensor.name] = entries.get("location", "")
    return locations
