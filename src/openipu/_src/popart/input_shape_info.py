"""`popart.InputShapeInfo`: shapes and types of inputs the ONNX model leaves open."""

from __future__ import annotations

from openipu._src.popart.builder.tensor_info import TensorInfo
from openipu._src.popart.errors import OptionTypeError, popart_exception


class InputShapeInfo:
    """Tensor id -> TensorInfo, for inputs whose shape or type the model does not fix."""

    def __init__(self) -> None:
        self._infos: dict[str, TensorInfo] = {}

    def add(self, tensorId: str, info: TensorInfo) -> None:  # noqa: N803 - the original's names
        if not isinstance(tensorId, str):
            raise OptionTypeError(
                f"InputShapeInfo.add: the tensor id must be a str, got {tensorId!r}"
            )
        if not isinstance(info, TensorInfo):
            raise OptionTypeError(
                f"InputShapeInfo.add('{tensorId}', info): info must be a TensorInfo, got "
                f"{info!r} ({type(info).__name__})"
            )
        self._infos[tensorId] = info

    def get(self, tensorId: str) -> TensorInfo:  # noqa: N803
        if tensorId not in self._infos:
            # The original's words (willow/src/inputshapeinfo.cpp, InputShapeInfo::get).
            raise popart_exception(
                f"No input shape info for Tensor `{tensorId}' in InputShapeInfo::get"
            )
        return self._infos[tensorId]

    def has(self, tensorId: str) -> bool:  # noqa: N803
        return tensorId in self._infos

    def getAllTensorInfo(self) -> dict[str, TensorInfo]:  # noqa: N802 - the C++ accessor
        return dict(self._infos)

    def __repr__(self) -> str:
        return f"InputShapeInfo({self._infos!r})"
