"""`modelToHost`: the session's model with its current weights, as an ONNX file.

Initializers that the session's model kept in external data files stay external: their data
is written to their location (relative to the model file, as ONNX resolves it), possibly
moved there by `updateExternallySavedTensorLocations`. Every file is written atomically.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto

from openipu._src.popart.builder.initializer_layout import popart_initializer, with_new_values
from openipu._src.popart.external_data import initializer_array
from openipu._src.popart.session.executable_file import atomic_output, write_bytes_atomically


def model_with_weights(
    model: onnx.ModelProto,
    weights: dict[str, np.ndarray],
    extra: dict[str, np.ndarray] | None = None,
) -> onnx.ModelProto:
    """The model with `weights` as its initializers' values, and `extra` tensors (a training
    session's optimizer state) as further initializers, replacing any of the same name."""
    extra = dict(extra or {})
    updated = onnx.ModelProto()
    updated.CopyFrom(model)
    for index, tensor in enumerate(updated.graph.initializer):
        value = extra.pop(tensor.name, weights.get(tensor.name))
        if value is not None:
            # In place, in the initializer's own fields, as PopART's modelToHost writes.
            updated.graph.initializer[index].CopyFrom(with_new_values(tensor, value))
    for name, value in extra.items():
        updated.graph.initializer.append(popart_initializer(value, name))
    return updated


def write_model(path: str, model: onnx.ModelProto, external_locations: dict[str, str]) -> None:
    # External data files go first, each atomically. Their layout depends only on the tensors'
    # shapes, so if the writer dies before the model file is replaced, the previous model
    # file still reads them consistently (with the new values).
    model = _with_external_data(model, external_locations, os.path.dirname(os.path.abspath(path)))
    write_bytes_atomically(path, model.SerializeToString())


def write_tensor_data(path: str, tensors: list[TensorProto]) -> None:
    """Writes the raw data of `tensors` back to back into one external data file."""
    with atomic_output(path) as stream:
        for tensor in tensors:
            stream.write(initializer_array(tensor).tobytes())


def _with_external_data(
    model: onnx.ModelProto, locations: dict[str, str], base_directory: str
) -> onnx.ModelProto:
    if not locations:
        return model
    by_location: dict[str, list[TensorProto]] = {}
    for tensor in model.graph.initializer:
        if tensor.name in locations:
            by_location.setdefault(locations[tensor.name], []).append(tensor)
    for location, tensors in by_location.items():
        write_tensor_data(os.path.join(base_directory, location), tensors)
        offset = 0
        for tensor in tensors:
            length = len(initializer_array(tensor).tobytes())
            for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
                tensor.ClearField(field)
            tensor.data_location = TensorProto.EXTERNAL
            del tensor.external_data[:]
            for key, value in (("location", location), ("offset", offset), ("length", length)):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, str(value)
            offset += length
    return model
