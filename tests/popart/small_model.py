"""The small model several session tests share: y = relu(x @ w + b), with numpy's answer.

A module of its own (not the conftest) so that `from small_model import ...` finds it
whichever folder's conftest pytest imported last (tests/conformance/popart has one too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import popart


@dataclass
class SmallModel:
    proto: bytes
    x: str
    hidden: str  # an intermediate tensor (not a graph output)
    y: str
    w: str
    b: str
    weights: dict[str, np.ndarray]


def build_small_model(constant_multiplier: float | None = None) -> SmallModel:
    """y = relu(x @ w + b) for x [2, 4]; `hidden` is x @ w."""
    rng = np.random.default_rng(0)
    weights = {
        "w": rng.normal(size=(4, 3)).astype(np.float32),
        "b": rng.normal(size=(3,)).astype(np.float32),
    }
    builder = popart.Builder(opsets={"ai.onnx": 11, "ai.onnx.ml": 1, "ai.graphcore": 1})
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    w = builder.addInitializedInputTensor(weights["w"], "w")
    b = builder.addInitializedInputTensor(weights["b"], "b")
    hidden = builder.aiOnnx.matmul([x, w])
    if constant_multiplier is not None:
        factor = builder.aiOnnx.constant(np.array(constant_multiplier, np.float32))
        hidden = builder.aiOnnx.mul([hidden, factor])
    y = builder.aiOnnx.relu([builder.aiOnnx.add([hidden, b])])
    builder.addOutputTensor(y)
    return SmallModel(
        builder.getModelProto(), x, hidden, y, w, b, {w: weights["w"], b: weights["b"]}
    )


def reference_outputs(model: SmallModel, x: np.ndarray, weights=None) -> dict[str, np.ndarray]:
    """numpy's y and hidden for one batch (or a stack of batches)."""
    weights = weights or model.weights
    hidden = x @ weights[model.w]
    return {model.hidden: hidden, model.y: np.maximum(hidden + weights[model.b], 0)}
