"""Initializers saved in external files, at locations relative to a directory or absolute.

PopART writes absolute locations (`Builder.saveInitializersExternally` with an absolute file
name) and reads them back; onnx's own readers refuse absolute locations. These read both.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import numpy_helper

from openipu._src.popart.errors import popart_exception


def is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def external_bytes(tensor: onnx.TensorProto, directory: str | None = None) -> bytes:
    """The bytes of an externally saved tensor (its location taken from `directory`, the
    working directory by default, unless absolute)."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    location = os.path.join(directory or os.getcwd(), entries.get("location", ""))
    offset = int(entries.get("offset", 0))
    length = int(entries["length"]) if "length" in entries else -1
    try:
        with open(location, "rb") as data_file:
            data_file.seek(offset)
            return data_file.read(length)
    except OSError as error:
        raise popart_exception(
            f"Cannot read the data of initializer '{tensor.name}' from {location!r}: "
            f"{error.strerror}"
        ) from None


def inline(tensor: onnx.TensorProto, directory: str | None = None) -> None:
    """Reads an externally saved tensor's data into it."""
    tensor.raw_data = external_bytes(tensor, directory)
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT


def initializer_array(tensor: onnx.TensorProto, directory: str | None = None) -> np.ndarray:
    """The value of an initializer, saved in the model or externally."""
    if not is_external(tensor):
        return numpy_helper.to_array(tensor)
    copy = onnx.TensorProto()
    copy.CopyFrom(tensor)
    inline(copy, directory)
    return numpy_helper.to_array(copy)
