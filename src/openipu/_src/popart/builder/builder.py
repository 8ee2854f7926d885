"""`popart.Builder`: the Python face of `_BuilderCore`, with the operator sets.

Any attribute that is not an operator set or one of the methods below is
forwarded to the `_BuilderCore`, as in the original.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from openipu._src.popart.builder.core import _BuilderCore
from openipu._src.popart.builder.model_context import (
    AI_GRAPHCORE,
    AI_ONNX,
    AI_ONNX_ML,
    SUPPORTED_OPSET_VERSIONS,
)
from openipu._src.popart.builder.opsets.ai_graphcore import AiGraphcoreOpset1
from openipu._src.popart.builder.opsets.ai_onnx import OPSET_CLASSES, AiOnnx
from openipu._src.popart.builder.opsets.ai_onnx_ml import AiOnnxMlOpset1
from openipu._src.popart.errors import UnsupportedOpsetError

_ONNX_OPSET_PREFIX = "aiOnnxOpset"


def _check_supported(domain: str, version: Any) -> int:
    supported = SUPPORTED_OPSET_VERSIONS.get(domain)
    if domain == AI_ONNX and isinstance(version, str) and version.isdigit():
        # The original names the ai.onnx opset class f"AiOnnx{version}", so "10" selects
        # version 10 too (python/popart/python_files/builder.py, aiOnnxOpsetVersion).
        version = int(version)
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)):
        raise UnsupportedOpsetError(f"opset version for {domain} must be an int, got {version!r}")
    if supported is not None and version not in supported:
        raise UnsupportedOpsetError(
            f"Unsupported or unrecognized {domain} version: {version}; "
            f"supported versions are {', '.join(map(str, supported))}"
        )
    return int(version)


class Builder:
    """Builds an ONNX model: `Builder()`, `Builder(modelBytesOrFileName)`, `Builder(opsets={...})`."""

    def __init__(
        self,
        modelProtoOrFilename: Any = None,  # noqa: N803 - the original's names
        opsets: dict[str, int] | None = None,
        builderCore: _BuilderCore | None = None,  # noqa: N803
    ) -> None:
        if builderCore is not None:
            self._impl = builderCore
        else:
            self._impl = _BuilderCore(modelProtoOrFilename)
        for domain, version in (opsets or {}).items():
            if domain not in (AI_ONNX, AI_GRAPHCORE):
                # The original reads only these two (python/popart/python_files/builder.py);
                # ai.onnx.ml and the custom domains get their versions from their ops.
                continue
            self._impl._context.use_opset(domain, _check_supported(domain, version))

    def __getattr__(self, name: str) -> Any:
        if name == "_impl":  # not set yet: avoid recursing while constructing or unpickling
            raise AttributeError(name)
        if name.startswith(_ONNX_OPSET_PREFIX):
            suffix = name[len(_ONNX_OPSET_PREFIX) :]
            if suffix.isdigit():
                return self._onnx_opset(int(suffix), name)
        return getattr(self._impl, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._impl)))

    @property
    def opsets(self) -> dict[str, int]:
        """The version of each operator set this model uses (or will use by default)."""
        context = self._impl._context
        versions = {
            domain: context.version(domain) for domain in (AI_ONNX, AI_ONNX_ML, AI_GRAPHCORE)
        }
        versions.update(context.opset_imports())
        return versions

    def _onnx_opset(self, version: int, selector: str) -> AiOnnx:
        version = _check_supported(AI_ONNX, version)
        self._impl._context.use_opset(AI_ONNX, version, selector)
        return OPSET_CLASSES[version](self, version)

    @property
    def aiOnnx(self) -> AiOnnx:  # noqa: N802 - the original's name
        """The ai.onnx operators of this model's version (default 10)."""
        return self._onnx_opset(self._impl._context.version(AI_ONNX), "aiOnnx")

    @property
    def aiOnnxMl(self) -> AiOnnxMlOpset1:  # noqa: N802
        return self.aiOnnxMlOpset1

    @property
    def aiOnnxMlOpset1(self) -> AiOnnxMlOpset1:  # noqa: N802
        self._impl._context.use_opset(AI_ONNX_ML, 1, "aiOnnxMlOpset1")
        return AiOnnxMlOpset1(self)

    @property
    def aiGraphcore(self) -> AiGraphcoreOpset1:  # noqa: N802
        return self.aiGraphcoreOpset1

    @property
    def aiGraphcoreOpset1(self) -> AiGraphcoreOpset1:  # noqa: N802
        self._impl._context.use_opset(AI_GRAPHCORE, 1, "aiGraphcoreOpset1")
        return AiGraphcoreOpset1(self)

    def createSubgraphBuilder(self) -> Builder:  # noqa: N802
        """A child builder for the body of a Loop, If, Scan or ai.graphcore Call."""
        return Builder(builderCore=self._impl.createSubgraphBuilder())

    def reshape_const(
        self,
        aiOnnx: AiOnnx,
        args: list[str],
        shape: Any,
        debugContext: str = "",  # noqa: N803
    ) -> str:
        """Reshape args[0] to `shape` through an int64 Constant."""
        # By keyword: Constant-11 takes is_value_sparse second (the original passes the name
        # positionally there, which fails on opset 11).
        new_shape = aiOnnx.constant(
            np.asarray(shape, dtype=np.int64), debugContext=f"{debugContext}_const"
        )
        return aiOnnx.reshape([args[0], new_shape], debugContext)


# What `Builder.__getattr__` returns, as the original's generated stubs annotate it (a
# runtime Union, not this module's postponed string annotation): the operator sets
# (python/popart/python_files/builder.py; stubs_test.py reads it with inspect.signature).
Builder.__getattr__.__annotations__["return"] = Union[  # noqa: UP007 - read as `.__args__`
    (AiGraphcoreOpset1, *(OPSET_CLASSES[version] for version in sorted(OPSET_CLASSES)))
]
