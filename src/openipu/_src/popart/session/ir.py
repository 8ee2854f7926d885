"""`Ir`: what a session was built from, which `InferenceSession.fromIr` builds another from.

The original's IR is PopART's own graph representation. The emulation lowers ONNX straight
to TensorFlow, so its "IR" is the checked model with the data flow, options, input shapes
and patterns that shaped the session.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import onnx

from openipu._src.popart.dataflow import DataFlow
from openipu._src.popart.input_shape_info import InputShapeInfo
from openipu._src.popart.options.patterns import Patterns
from openipu._src.popart.options.session_options import SessionOptions


@dataclass
class Ir:
    model: onnx.ModelProto
    data_flow: DataFlow
    options: SessionOptions
    input_shape_info: InputShapeInfo
    patterns: Patterns
    tensor_ids: tuple[str, ...] = ()

    def getModelProto(self) -> bytes:  # noqa: N802 - the original's names
        serialized: bytes = self.model.SerializeToString()
        return serialized

    def getDataFlow(self) -> DataFlow:  # noqa: N802
        return copy.deepcopy(self.data_flow)

    def getSessionOptions(self) -> SessionOptions:  # noqa: N802
        return copy.deepcopy(self.options)

    def getTensorIds(self) -> set[str]:  # noqa: N802
        return set(self.tensor_ids)
