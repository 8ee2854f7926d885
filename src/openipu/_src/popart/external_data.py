"""Initializers saved in external files.

PopART keeps a location as the file name it was given: absolute, or relative to the working
directory when it is used (not to the model file's directory, as onnx's own readers take it:
willow/src/onnxutil.cpp, ExternalTensorProtoInfo and saveInitializersExternally;
external_tensorproto_data_test.py, test_external_location_relative_path).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from openipu._src.popart.errors import popart_exception


@dataclass(frozen=True)
class ExternalEntry:
    """Where an initializer's bytes are: `length` bytes at `offset` of the file `location`."""

    location: str
    offset: int
    length: int


def is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def external_entry(tensor: onnx.TensorProto) -> ExternalEntry:
    entries = {entry.key: entry.value for entry in tensor.external_data}
    return ExternalEntry(
        entries.get("location", ""), int(entries.get("offset", 0)), int(entries.get("length", -1))
    )


def point_at(tensor: onnx.TensorProto, entry: ExternalEntry) -> None:
    """Makes `tensor` an externally saved one, its data at `entry`."""
    for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
        tensor.ClearField(name)
    tensor.ClearField("uint64_data")
    tensor.ClearField("string_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    del tensor.external_data[:]
    for key, value in (("location", entry.location), ("offset", entry.offset),
                       ("length", entry.length)):  # fmt: skip
        tensor.external_data.add(key=key, value=str(value))


def check_parent_directory(filename: str) -> None:
    parent = os.path.dirname(filename)
    if parent and not os.path.exists(parent):
        # willow/src/onnxutil.cpp, saveInitializersExternally: the original's words.
        raise popart_exception(
            f"Saving tensor data to file {filename}, but its parent directory does not exist"
        )


def write_back_to_back(
    filename: str, tensors: Iterable[tuple[str, bytes]], append: bool = False
) -> dict[str, ExternalEntry]:
    """Writes the bytes of named tensors one after the other into `filename` (after what it
    holds when `append`); where each one went."""
    entries = {}
    with open(filename, "ab" if append else "wb") as data_file:
        for name, data in tensors:
            entries[name] = ExternalEntry(filename, data_file.tell(), len(data))
            data_file.write(data)
    return entries


def read_entry(entry: ExternalEntry) -> bytes:
    with open(entry.location, "rb") as data_file:
        data_file.seek(entry.offset)
        return data_file.read(entry.length)


def write_in_place(name: str, entry: ExternalEntry, data: bytes) -> None:
    """Overwrites a tensor's bytes where they are saved (Session::modelToHost writes into the
    existing file, which it does not create: willow/src/session.cpp)."""
    if not os.path.exists(entry.location):
        # willow/src/onnxutil.cpp, ExternalTensorProtoInfo: the original's words.
        raise popart_exception(
            f"Unrecognised file name '{entry.location}' for externally stored tensor '{name}'"
        )
    if len(data) != entry.length:
        raise popart_exception(
            f"Externally stored tensor '{name}' has {len(data)} bytes, but its external data "
            f"entry in '{entry.location}' has length {entry.length}"
        )
    with open(entry.location, "r+b") as data_file:
        data_file.seek(entry.offset)
        data_file.write(data)


def external_bytes(tensor: onnx.TensorProto, directory: str | None = None) -> bytes:
    """The bytes of an externally saved tensor (its location taken from `directory`, the
    working directory by default, unless absolute)."""
    entry = external_entry(tensor)
    location = os.path.join(directory or os.getcwd(), entry.location)
    if not os.path.isfile(location):
        # The words of ONNX's checker, which the original runs on a model it loads.
        raise popart_exception(
            f"Data of TensorProto ( tensor name: {tensor.name}) should be stored in "
            f"{entry.location}, but it doesn't exist or is not accessible."
        )
    try:
        with open(location, "rb") as data_file:
            data_file.seek(entry.offset)
            return data_file.read(entry.length)
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
