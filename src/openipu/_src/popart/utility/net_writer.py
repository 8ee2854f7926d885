"""`popart.writer.NetWriter` (spec 13.10.1): the base class a framework inherits once to drive
PopART; it keeps the model's description and dispatches a step to `train` or `infer`."""

from __future__ import annotations

from typing import Any


class NetWriter:
    def __init__(
        self,
        inNames: list[str],
        outNames: list[str],
        optimizer: Any,
        dataFlow: Any,
        inputShapeInfo: Any,
    ) -> None:
        self.inNames = list(inNames)
        self.outNames = list(outNames)
        self.optimizer = optimizer
        self.dataFlow = dataFlow
        self.inputShapeInfo = inputShapeInfo
        # Without an optimizer the writer is for inference only (as the original decides).
        self.trainMode = optimizer is not None

    def infer(self, inputsMap: dict[str, Any]) -> Any:
        """Runs batchesPerStep inference steps: to be implemented by the framework."""
        raise NotImplementedError(f"{type(self).__name__} must implement NetWriter.infer")

    def train(self, inputsMap: dict[str, Any]) -> Any:
        """Runs batchesPerStep training steps: to be implemented by the framework."""
        raise NotImplementedError(f"{type(self).__name__} must implement NetWriter.train")

    def saveModel(self, filename: str) -> None:
        """Writes the framework's model as ONNX: to be implemented by the framework."""
        raise NotImplementedError(f"{type(self).__name__} must implement NetWriter.saveModel")

    def step(self, inputsMap: dict[str, Any]) -> Any:
        return self.train(inputsMap) if self.trainMode else self.infer(inputsMap)
