"""The ONNX model a session runs: read from bytes, a ModelProto or a file, and checked.

Besides the builder's checks (a parsable, valid ONNX model), a session runs one version of
each operator set: a model that imports several (ai.onnx once as "" and once as "ai.onnx")
runs the largest, as the original's IR does.
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
from openipu._src.popart.external_data import ExternalEntry, external_entry, is_external

_DEFAULT_DOMAIN = "ai.onnx"


@dataclass
class ModelSource:
    """A checked model, and where its externally saved initializers live (by tensor id)."""

    model: ModelProto
    external_locations: dict[str, ExternalEntry] = field(default_factory=dict)


def read_model(model_or_filename: Any) -> ModelSource:
    """The model of a session's `fnModel` (serialized bytes, a ModelProto or a file name)."""
    model = load_model(model_or_filename, refuse_unsupported)
    check_opsets(model)
    # A model read from a file has its external data read in; the others keep the entries.
    header = (
        onnx.load_model(model_or_filename, load_external_data=False)
        if isinstance(model_or_filename, (str, os.PathLike))
        else model
    )
    # modelToHost writes the weights back where the model keeps them (the file as the model
    # names it: relative to the working directory; external_tensorproto_data_test.py).
    return ModelSource(model, _external_entries(header))


def refuse_unsupported(model: ModelProto) -> None:
    """What the original's IR refuses before checking anything else (constant folding of
    a sparse Constant: willow/src/ces/onnxconstexpr.cpp)."""
    for graph in iter_graphs(model.graph):
        for node in graph.node:
            if node.op_type == "Constant" and any(a.name == "sparse_value" for a in node.attribute):
                raise popart_exception("The Constant op attribute 'sparse_value' is not supported.")


def check_opsets(model: ModelProto) -> dict[str, int]:
    """One version per operator-set domain ("" and "ai.onnx" are the same domain).

    A domain imported more than once runs its largest version, as the original's IR reads it
    (willow/src/ir.cpp, Ir::getOpSetVersionFromModel); the model keeps one entry for it, so
    every reader of `opset_import` here sees that version.
    """
    versions: dict[str, int] = {}
    for entry in model.opset_import:
        domain = entry.domain or _DEFAULT_DOMAIN
        versions[domain] = max(versions.get(domain, entry.version), entry.version)
    if len(versions) != len(model.opset_import):
        kept: set[str] = set()
        entries = []
        for entry in model.opset_import:
            domain = entry.domain or _DEFAULT_DOMAIN
            if domain not in kept:
                kept.add(domain)
                entries.append(onnx.helper.make_opsetid(entry.domain, versions[domain]))
        del model.opset_import[:]
        model.opset_import.extend(entries)
    return versions


def _external_entries(header: ModelProto) -> dict[str, ExternalEntry]:
    """Where each initializer of the main graph kept in a data file is (by tensor id)."""
    return {
        tensor.name: external_entry(tensor)
        for tensor in header.graph.initializer
        if is_external(tensor)
    }
