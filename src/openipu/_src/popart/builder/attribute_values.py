"""Python values <-> ONNX AttributeProto, with errors that name the op and attribute."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from onnx import AttributeProto, GraphProto, TensorProto, helper, numpy_helper

from openipu._src.popart.errors import incompatible_arguments, popart_exception

AttributeType = AttributeProto.AttributeType


def _bad(owner: str, name: str, value: Any, expected: str) -> popart_exception:
    # The original's bindings convert each attribute argument to its C++ type; a value that
    # does not convert is pybind11's TypeError.
    return incompatible_arguments(
        owner,
        [f"(self, ..., {name}: {expected}, ...)"],
        [value],
        f"{owner}: attribute '{name}' must be {expected}, got {type(value).__name__}",
    )


def _is_int(value: Any) -> bool:
    # bool counts: PopART stores flags such as inputIsLogProbability as ints.
    return isinstance(value, (int, np.integer, np.bool_))


def _is_number(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        # pybind11's float caster converts anything with __float__, a 0-d numpy array too
        # (operators_test/randomnormal_test.py passes mean=np.array(1.0)).
        return value.ndim == 0 and value.dtype.kind in "biuf"
    return isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, np.bool_)


def _as_sequence(value: Any) -> list[Any] | None:
    if isinstance(value, np.ndarray):
        return value.reshape(-1).tolist()
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        return None
    return list(value)


def _as_tensor(value: Any, name: str) -> TensorProto:
    if isinstance(value, TensorProto):
        return value
    array = np.asarray(value)
    if array.dtype == np.float64 and not isinstance(value, np.ndarray):
        # A bare Python float means float32, the type ONNX models use by default.
        array = array.astype(np.float32)
    return numpy_helper.from_array(array, name)


def make_typed_attribute(name: str, value: Any, attribute_type: int, owner: str) -> AttributeProto:
    """An attribute of the type the operator schema declares; anything else is an error."""
    if attribute_type == AttributeProto.INT:
        if not _is_int(value):
            raise _bad(owner, name, value, "an integer")
        return helper.make_attribute(name, int(value), attr_type=AttributeProto.INT)
    if attribute_type == AttributeProto.FLOAT:
        if not _is_number(value):
            raise _bad(owner, name, value, "a number")
        return helper.make_attribute(name, float(value), attr_type=AttributeProto.FLOAT)
    if attribute_type == AttributeProto.STRING:
        if not isinstance(value, (str, bytes)):
            raise _bad(owner, name, value, "a string")
        return helper.make_attribute(name, value, attr_type=AttributeProto.STRING)
    sequence = _as_sequence(value)
    if attribute_type == AttributeProto.INTS:
        if sequence is None or not all(_is_int(item) for item in sequence):
            raise _bad(owner, name, value, "a list of integers")
        return helper.make_attribute(
            name, [int(v) for v in sequence], attr_type=AttributeProto.INTS
        )
    if attribute_type == AttributeProto.FLOATS:
        if sequence is None or not all(_is_number(item) for item in sequence):
            raise _bad(owner, name, value, "a list of numbers")
        return helper.make_attribute(
            name, [float(v) for v in sequence], attr_type=AttributeProto.FLOATS
        )
    if attribute_type == AttributeProto.STRINGS:
        if sequence is None or not all(isinstance(item, (str, bytes)) for item in sequence):
            raise _bad(owner, name, value, "a list of strings")
        return helper.make_attribute(name, sequence, attr_type=AttributeProto.STRINGS)
    if attribute_type == AttributeProto.TENSOR:
        if isinstance(value, (str, bytes, dict)) or value is None:
            raise _bad(owner, name, value, "a numpy array")
        return helper.make_attribute(name, _as_tensor(value, name), attr_type=AttributeProto.TENSOR)
    if attribute_type == AttributeProto.GRAPH:
        if not isinstance(value, GraphProto):
            raise _bad(owner, name, value, "a subgraph")
        return helper.make_attribute(name, value, attr_type=AttributeProto.GRAPH)
    raise popart_exception(
        f"{owner}: attribute '{name}' has type {AttributeType.Name(attribute_type)}, "
        "which the builder does not support"
    )


def attribute_type_of_value(name: str, value: Any, owner: str) -> AttributeType:
    """The attribute type a Python value stands for, when no schema says it."""
    if isinstance(value, (bool, int, np.integer, np.bool_)):
        return AttributeProto.INT
    if isinstance(value, (float, np.floating)):
        return AttributeProto.FLOAT
    if isinstance(value, (str, bytes)):
        return AttributeProto.STRING
    if isinstance(value, (np.ndarray, TensorProto)):
        return AttributeProto.TENSOR
    if isinstance(value, GraphProto):
        return AttributeProto.GRAPH
    sequence = _as_sequence(value)
    if sequence is None:
        raise _bad(owner, name, value, "an int, float, str or a list of one of them")
    if all(_is_int(item) for item in sequence):  # also the empty list, like the original
        return AttributeProto.INTS
    if all(_is_number(item) for item in sequence):
        return AttributeProto.FLOATS
    if all(isinstance(item, (str, bytes)) for item in sequence):
        return AttributeProto.STRINGS
    raise _bad(owner, name, value, "a list of ints, of floats or of strings")


def make_attribute(name: str, value: Any, owner: str) -> AttributeProto:
    return make_typed_attribute(name, value, attribute_type_of_value(name, value, owner), owner)


def attribute_value(attribute: AttributeProto) -> Any:
    """The Python value of an attribute; strings come back as str, not bytes."""
    value = helper.get_attribute_value(attribute)
    if attribute.type == AttributeProto.STRING:
        return value.decode("utf-8")
    if attribute.type == AttributeProto.STRINGS:
        return [item.decode("utf-8") for item in value]
    if attribute.type in (AttributeProto.INTS, AttributeProto.FLOATS):
        return list(value)
    return value
