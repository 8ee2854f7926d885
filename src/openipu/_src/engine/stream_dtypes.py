"""The element types an IPU data stream (an infeed or an outfeed) carries.

The original's feed kernels check every component of an element against one set of
types when the op is made (tensorflow/compiler/plugin/poplar/kernels/datastream/feeds.cc
`ok_types`, `GetFeedConfig`) and fail with a FailedPreconditionError: int64 and float64
data must be cast before they reach the IPU (the original's Keras casts float64 itself
when the v2 dtype behaviour is on, keras/ipu/extensions/data_adapter.py
`_autocast_dataset`).
"""

from __future__ import annotations

from collections.abc import Iterable

import tensorflow as tf
from tensorflow.core.framework import types_pb2

STREAM_DTYPES: tuple[tf.DType, ...] = (
    tf.int32,
    tf.float32,
    tf.float16,
    tf.bool,
    tf.int8,
    tf.uint8,
)

#: What every message starts with: the original's words (feeds.cc).
UNSUPPORTED_MARKER = "Unsupported datatype"


def _type_string(dtype: tf.DType) -> str:
    """TensorFlow's C++ name of the type (DataTypeString: "float", "half", "double")."""
    name: str = types_pb2.DataType.Name(dtype.as_datatype_enum)
    return name.removeprefix("DT_").lower()


def unsupported_dtype_message(dtypes: Iterable[tf.DType], operation: str) -> str | None:
    """Why a stream cannot carry elements of the flat `dtypes` (the first component of
    another type), or None. `operation` names the feed op, e.g. "IPUCreateDatasetIterator
    with feed id 'feed3'"."""
    for index, dtype in enumerate(dtypes):
        if dtype not in STREAM_DTYPES:
            allowed = ",".join(_type_string(d) for d in STREAM_DTYPES)
            return (
                f"{UNSUPPORTED_MARKER} {_type_string(dtype)} on index {index} of feed operation "
                f"{operation}. You should use a tf.data.Dataset.map() operation to cast the "
                f"element into one of ({allowed})."
            )
    return None


def check(dtypes: Iterable[tf.DType], operation: str) -> None:
    """Raises the original's FailedPreconditionError if a stream cannot carry `dtypes`."""
    unsupported = unsupported_dtype_message(dtypes, operation)
    if unsupported is not None:
        raise tf.errors.FailedPreconditionError(None, None, unsupported)
