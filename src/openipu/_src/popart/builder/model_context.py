"""State that a model and all its subgraph builders share: tensor ids and opset versions."""

from __future__ import annotations

from openipu._src.popart.errors import popart_exception

NAME_DELIMITER = "/"

AI_ONNX = "ai.onnx"
AI_ONNX_ML = "ai.onnx.ml"
AI_GRAPHCORE = "ai.graphcore"

# The original's popart.defaultAiOnnxOpset, defaultAiOnnxMlOpset, defaultAiGraphcoreOpset.
DEFAULT_OPSET_VERSIONS = {AI_ONNX: 10, AI_ONNX_ML: 1, AI_GRAPHCORE: 1}
SUPPORTED_OPSET_VERSIONS = {AI_ONNX: tuple(range(6, 12)), AI_ONNX_ML: (1,), AI_GRAPHCORE: (1,)}


def onnx_domain(domain: str) -> str:
    """The domain as a NodeProto spells it: the default ONNX domain is the empty string."""
    return "" if domain == AI_ONNX else domain


class TensorIdAllocator:
    """Hands out tensor ids that are unique across a model and its subgraphs.

    Like PopART, the first request for a name gets the name itself and the
    n-th repeat gets `name/n` ("Add:0", "Add:0/1", "Add:0/2", ...). Ids
    already in the model (a loaded model, ids the user named) are never
    reused: ONNX needs every name to be assigned once, subgraphs included.
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._next_suffix: dict[str, int] = {}

    def reserve(self, tensor_id: str) -> None:
        self._taken.add(tensor_id)

    def allocate(self, proposed: str) -> str:
        if proposed not in self._taken:
            self._taken.add(proposed)
            return proposed
        suffix = self._next_suffix.get(proposed, 1)
        while f"{proposed}{NAME_DELIMITER}{suffix}" in self._taken:
            suffix += 1
        self._next_suffix[proposed] = suffix + 1
        unique = f"{proposed}{NAME_DELIMITER}{suffix}"
        self._taken.add(unique)
        return unique


class ModelContext:
    """Opset versions and id allocation shared by a root builder and its subgraph builders."""

    def __init__(self, declared_opsets: dict[str, int] | None = None) -> None:
        self.ids = TensorIdAllocator()
        # Versions fixed up front (the `opsets` argument, a loaded model) or by a first use.
        self._fixed: dict[str, int] = dict(declared_opsets or {})
        self._subgraph_count = 0

    def fixed_version(self, domain: str) -> int | None:
        return self._fixed.get(domain)

    def version(self, domain: str) -> int:
        return self._fixed.get(domain, DEFAULT_OPSET_VERSIONS.get(domain, 1))

    def use_opset(self, domain: str, version: int, selector: str | None = None) -> None:
        """Fix `domain` at `version`; a model holds one version per domain."""
        fixed = self._fixed.get(domain)
        if fixed is not None and fixed != version:
            what = f"opset '{selector}'" if selector else f"{domain} opset version {version}"
            raise popart_exception(
                f"Invalid {what} selected. Opset for domain {domain} already defined as {fixed}"
            )
        self._fixed[domain] = version

    def opset_imports(self) -> dict[str, int]:
        imports = {AI_ONNX: self.version(AI_ONNX)}
        imports.update(self._fixed)
        return imports

    def next_subgraph_name(self, parent_name: str) -> str:
        self._subgraph_count += 1
        return f"{parent_name}_subgraph_{self._subgraph_count}"


# The original's module-level names for the defaults.
defaultAiOnnxOpset = DEFAULT_OPSET_VERSIONS[AI_ONNX]
defaultAiOnnxMlOpset = DEFAULT_OPSET_VERSIONS[AI_ONNX_ML]
defaultAiGraphcoreOpset = DEFAULT_OPSET_VERSIONS[AI_GRAPHCORE]
