"""The ai.onnx.ml operator set, version 1 (the only one PopART exposes)."""

from __future__ import annotations

from typing import Any

from openipu._src.popart.builder.model_context import AI_ONNX_ML
from openipu._src.popart.builder.opsets.base import Opset
from openipu._src.popart.builder.opsets.schema_methods import install_operator_methods
from openipu._src.popart.errors import UnsupportedOpsetError


class AiOnnxMlOpset1(Opset):
    """The ai.onnx.ml operators of version 1 (ArrayFeatureExtractor ... ZipMap)."""

    domain = AI_ONNX_ML

    def __init__(self, builder: Any, version: int = 1) -> None:
        if version != 1:
            raise UnsupportedOpsetError(f"Unsupported or unrecognized ai.OnnxMl version: {version}")
        super().__init__(builder, version)


# The original's Python wrapper class; one version exists, so it is the same class.
AiOnnxMl = AiOnnxMlOpset1

install_operator_methods(AiOnnxMlOpset1, domain=AI_ONNX_ML, version=1, previous_version=None)
