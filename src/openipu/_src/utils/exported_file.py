"""The binary file format of `export_dataset_to_file` and `export_inputs_to_file`.

One file holds one tensor (for a dataset: one component of all exported
elements, stacked along a new first axis):

    bytes 0-7    magic b"OPENIPU\\x00"
    bytes 8-11   header length H, uint32 little-endian
    bytes 12-    H bytes of UTF-8 JSON, padded with spaces so the data starts
                 at a multiple of 64 bytes:
                 {"version": 1, "dtype": "<TensorFlow dtype name>",
                  "shape": [...], "byte_order": "little",
                  "feed_name": "...", "component": "..."}
    then         the tensor's bytes: C order, little-endian

`read_exported_file` reads the tensor back as a numpy array.
"""

from __future__ import annotations

import json
import os
import struct
import sys

import numpy as np
import tensorflow as tf

MAGIC = b"OPENIPU\x00"
VERSION = 1
_LENGTH = struct.Struct("<I")
_DATA_ALIGNMENT = 64


def component_filenames(output_filename: str | os.PathLike, count: int) -> list[str]:
    """The file of each component: 'name.bin' -> 'name.0.bin', 'name.1.bin', ...

    A single component goes to `output_filename` itself.
    """
    path = os.fspath(output_filename)
    if count == 1:
        return [path]
    root, extension = os.path.splitext(path)
    return [f"{root}.{index}{extension or '.bin'}" for index in range(count)]


def write_exported_file(
    path: str, array: np.ndarray, feed_name: str = "", component: str = ""
) -> None:
    """Writes one tensor in the exported format."""
    array = np.asarray(array)
    dtype = tf.as_dtype(array.dtype)
    if not (dtype.is_floating or dtype.is_integer or dtype.is_complex or dtype.is_bool):
        raise TypeError(
            f"Only numeric and bool tensors can be exported, got {dtype.name} "
            f"(component {component!r})"
        )
    header = {
        "version": VERSION,
        "dtype": dtype.name,
        "shape": list(array.shape),
        "byte_order": "little",
        "feed_name": feed_name,
        "component": component,
    }
    header_bytes = json.dumps(header).encode()
    unpadded = len(MAGIC) + _LENGTH.size + len(header_bytes)
    header_bytes += b" " * (-unpadded % _DATA_ALIGNMENT)
    data = np.ascontiguousarray(array)
    if sys.byteorder == "big":
        data = data.byteswap()
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(_LENGTH.pack(len(header_bytes)))
        f.write(header_bytes)
        f.write(data.tobytes())


def read_exported_metadata(path: str | os.PathLike) -> dict:
    """The JSON header of an exported file (dtype, shape, feed name, component)."""
    with open(path, "rb") as f:
        return _read_header(f, path)


def read_exported_file(path: str | os.PathLike) -> np.ndarray:
    """The tensor stored in an exported file."""
    with open(path, "rb") as f:
        header = _read_header(f, path)
        data = f.read()
    dtype = np.dtype(tf.as_dtype(header["dtype"]).as_numpy_dtype)
    array = np.frombuffer(data, dtype=dtype).reshape(header["shape"])
    if sys.byteorder == "big":
        array = array.byteswap()
    return array.copy()


def _read_header(f, path) -> dict:
    if f.read(len(MAGIC)) != MAGIC:
        raise ValueError(f"{os.fspath(path)} is not a file written by export_dataset_to_file")
    (length,) = _LENGTH.unpack(f.read(_LENGTH.size))
    header = json.loads(f.read(length).decode())
    if header.get("version") != VERSION:
        raise ValueError(
            f"{os.fspath(path)} has format version {header.get('version')}; "
            f"this reader knows version {VERSION}"
        )
    return header
