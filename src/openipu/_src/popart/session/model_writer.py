"""`modelToHost`: the session's model with its current weights, as an ONNX file.

Initializers that the session's model kept in external data files stay external: their data
is written in place, where their entries say (the location as the model names it, relative to
the working directory, possibly moved by `updateExternallySavedTensorLocations`), as
Session::modelToHost does (willow/src/session.cpp). The model file is written atomically.
"""

from __future__ import annotations

import numpy as np
import onnx

from openipu._src.popart.builder.initializer_layout import popart_initializer, with_new_values
from openipu._src.popart.external_data import (
    ExternalEntry,
    initializer_array,
    point_at,
    write_in_place,
)
from openipu._src.popart.session.executable_file import write_bytes_atomically


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


def write_model(path: str, model: onnx.ModelProto, external: dict[str, ExternalEntry]) -> None:
    for tensor in model.graph.initializer:
        entry = external.get(tensor.name)
        if entry is not None:
            write_in_place(tensor.name, entry, initializer_array(tensor).tobytes())
            point_at(tensor, entry)
    write_bytes_atomically(path, model.SerializeToString())
