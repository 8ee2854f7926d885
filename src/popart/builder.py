"""`popart.builder`: the builder module of the original (re-exports only)."""
# ruff: noqa: F401 - every import here is a re-export

from openipu._src.popart.builder import (
    AiGraphcore,
    AiGraphcoreOpset1,
    AiOnnx,
    AiOnnx6,
    AiOnnx7,
    AiOnnx8,
    AiOnnx9,
    AiOnnx10,
    AiOnnx11,
    AiOnnxMl,
    AiOnnxMlOpset1,
    AiOnnxOpset6,
    AiOnnxOpset7,
    AiOnnxOpset8,
    AiOnnxOpset9,
    AiOnnxOpset10,
    AiOnnxOpset11,
    Builder,
    Opset,
    _BuilderCore,
)
