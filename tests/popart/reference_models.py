"""A builder's model as the reference runtimes (onnxruntime, onnx.reference) take it.

PopART's builder gives every node its own '__' attributes (at least '__debug_info_id', as
the original's does), which ONNX's checker allows but onnxruntime's and onnx.reference's
Constant refuse; the reference runs the model without them.
"""

from __future__ import annotations

import onnx

from openipu._src.popart.builder.builder_debug_info import strip_internal_attributes


def for_reference(model: onnx.ModelProto | bytes) -> onnx.ModelProto:
    """A copy of `model` (a ModelProto or its bytes) without PopART's node attributes."""
    copy = onnx.ModelProto()
    if isinstance(model, bytes):
        copy.ParseFromString(model)
    else:
        copy.CopyFrom(model)
    strip_internal_attributes(copy.graph)
    return copy
