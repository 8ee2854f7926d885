"""PopART's builder: makes ONNX models (`popart.builder` in the original).

The names here are those of the original `popart.builder` module.
"""

from openipu._src.popart.builder.builder import Builder
from openipu._src.popart.builder.core import _BuilderCore
from openipu._src.popart.builder.opsets.ai_graphcore import AiGraphcore, AiGraphcoreOpset1
from openipu._src.popart.builder.opsets.ai_onnx import (
    AiOnnx,
    AiOnnxOpset6,
    AiOnnxOpset7,
    AiOnnxOpset8,
    AiOnnxOpset9,
    AiOnnxOpset10,
    AiOnnxOpset11,
)
from openipu._src.popart.builder.opsets.ai_onnx_ml import AiOnnxMl, AiOnnxMlOpset1
from openipu._src.popart.builder.opsets.base import Opset

# The original's Python wrapper classes carry these names.
AiOnnx6 = AiOnnxOpset6
AiOnnx7 = AiOnnxOpset7
AiOnnx8 = AiOnnxOpset8
AiOnnx9 = AiOnnxOpset9
AiOnnx10 = AiOnnxOpset10
AiOnnx11 = AiOnnxOpset11

__all__ = [
    "AiGraphcore",
    "AiGraphcoreOpset1",
    "AiOnnx",
    "AiOnnx6",
    "AiOnnx7",
    "AiOnnx8",
    "AiOnnx9",
    "AiOnnx10",
    "AiOnnx11",
    "AiOnnxMl",
    "AiOnnxMlOpset1",
    "AiOnnxOpset6",
    "AiOnnxOpset7",
    "AiOnnxOpset8",
    "AiOnnxOpset9",
    "AiOnnxOpset10",
    "AiOnnxOpset11",
    "Builder",
    "Opset",
    "_BuilderCore",
]
