"""Reading models into a builder and writing initializer data to external files."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

import onnx
from google.protobuf.message import DecodeError
from onnx import GraphProto, ModelProto, TensorProto

from openipu._src.popart.builder.graph_walk import iter_graphs
from openipu._src.popart.builder.model_checks import check_model
from openipu._src.popart.errors import incompatible_constructor_arguments, popart_exception
from openipu._src.popart.external_data import (
    check_parent_directory,
    initializer_array,
    inline,
    is_external,
    point_at,
    write_back_to_back,
)

logger = logging.getLogger("popart.builder")


def load_model(
    model_or_filename: Any,
    refuse: Callable[[ModelProto], None] | None = None,
    infer_shapes: bool = True,
) -> ModelProto:
    """A checked ModelProto from serialized bytes, a file name, or a ModelProto; `refuse`
    (a session's own checks, which come first in the original) runs before ONNX's;
    `infer_shapes` False checks the structure only (no shape and type inference)."""
    if isinstance(model_or_filename, ModelProto):
        model = ModelProto()
        model.CopyFrom(model_or_filename)
        what = "the ModelProto"
    elif isinstance(model_or_filename, (bytes, bytearray, memoryview)):
        model = _parse(bytes(model_or_filename), "the model bytes")
        what = "the model bytes"
    elif isinstance(model_or_filename, (str, os.PathLike)):
        path = os.fspath(model_or_filename)
        if not os.path.isfile(path):
            # The original then reads the string as a serialized ModelProto, and fails so.
            raise popart_exception(_not_a_model_message(path.encode()))
        try:
            model = onnx.load_model(path, load_external_data=False)
        except (DecodeError, RuntimeError, ValueError, OSError) as error:
            raise popart_exception(f"{path!r} is not a valid ONNX model: {error}") from None
        _load_external_data(model)
        what = repr(path)
    else:
        # The original's constructors take a std::string: pybind11's TypeError otherwise.
        raise incompatible_constructor_arguments(
            ["(modelProtoOrFilename: str)"],
            [model_or_filename],
            "modelProtoOrFilename must be serialized ModelProto bytes or an .onnx file name, "
            f"got {type(model_or_filename).__name__}",
        )
    _drop_undefined_value_types(model)
    if refuse is not None:
        refuse(model)
    check_model(model, what, infer_shapes)
    return model


def _drop_undefined_value_types(model: ModelProto) -> None:
    """Forget the value_info entries of undefined element type: the original's Builder writes
    one for each tensor its shape inference could not type (willow/src/builder_impl.cpp,
    runShapeInference), and its IR, which never reads value_info, runs such models."""
    for graph in iter_graphs(model.graph):
        undefined = [
            value
            for value in graph.value_info
            if value.type.WhichOneof("value") == "tensor_type"
            and value.type.tensor_type.elem_type == TensorProto.UNDEFINED
        ]
        for value in undefined:
            graph.value_info.remove(value)


def _load_external_data(model: ModelProto) -> None:
    """Reads the initializers saved in external files into the model, at locations relative
    to the working directory or absolute (see `external_data`)."""
    for graph in iter_graphs(model.graph):
        for tensor in graph.initializer:
            if is_external(tensor):
                inline(tensor)


def _printable(data: bytes, limit: int = 100) -> str:
    """The first `limit` bytes as Python prints a bytes object (willow/src/filereader.cpp,
    formatModelProtoString)."""
    shown = repr(data[:limit])[2:-1]
    return shown + ("..." if len(data) > limit else "")


def _not_a_model_message(data: bytes) -> str:
    return (
        f"Failed to load a ModelProto from the string '{_printable(data)}'.\nCheck that it is "
        "either a valid path to an existing onnx model file, or is a valid onnx ModelProto "
        "string."
    )


def _parse(data: bytes, what: str) -> ModelProto:
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as error:
        # The original's message (willow/src/filereader.cpp; its model_loading_test matches
        # both ends of it); protobuf's reason goes to the log.
        logger.debug("%s are not a serialized ONNX ModelProto: %s", what, error)
        raise popart_exception(_not_a_model_message(data)) from None
    if not model.HasField("graph"):
        raise popart_exception(f"{what} are not a serialized ONNX ModelProto: it has no graph")
    return model


def names_in_graph(graph: GraphProto) -> set[str]:
    """Every tensor name a graph (and its subgraphs) defines."""
    names: set[str] = set()
    for each in iter_graphs(graph):
        names.update(value.name for value in each.input)
        names.update(tensor.name for tensor in each.initializer)
        for node in each.node:
            names.update(output for output in node.output if output)
    return names


def move_initializers_to_file(
    initializers: Iterable[TensorProto], tensor_ids: list[str], filename: str
) -> None:
    """Write the data of the named initializers to `filename` and point them at it.

    `filename` is used as given in the model, as PopART does; a relative one is
    written relative to the current directory.
    """
    by_name = {tensor.name: tensor for tensor in initializers}
    # willow/src/onnxutil.cpp, saveInitializersExternally: the original's checks and messages.
    check_parent_directory(filename)
    for tensor_id in tensor_ids:
        if tensor_id not in by_name:
            raise popart_exception(f"Tensor '{tensor_id}' is not an initializer")
        if by_name[tensor_id].data_location == TensorProto.EXTERNAL:
            raise popart_exception(f"Tensor '{tensor_id}' already has an external data_location")
    entries = write_back_to_back(
        filename, [(i, initializer_array(by_name[i]).tobytes()) for i in tensor_ids]
    )
    for tensor_id, entry in entries.items():
        point_at(by_name[tensor_id], entry)
