"""The op registry: lowerings keyed by (domain, op_type, since_version).

Each lowering is registered for the opset version where its semantics start. A model that imports
opset ``v`` of a domain gets, for each op type, the registration with the largest
``since_version <= v``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from openipu._src.popart.errors import UnsupportedOpError

if TYPE_CHECKING:
    from openipu._src.popart.lowering.op import Op

ONNX_DOMAIN = ""
ONNX_ML_DOMAIN = "ai.onnx.ml"
GRAPHCORE_DOMAIN = "ai.graphcore"

OpClass = TypeVar("OpClass", bound="type[Op]")

# (domain, op_type) -> sorted list of (since_version, op class)
_REGISTRY: dict[tuple[str, str], list[tuple[int, type[Op]]]] = {}


def canonical_domain(domain: str) -> str:
    """ONNX spells the default domain both "" and "ai.onnx"."""
    return ONNX_DOMAIN if domain == "ai.onnx" else domain


def register_op(
    op_type: str, since: int | Iterable[int], domain: str = ONNX_DOMAIN
) -> Callable[[OpClass], OpClass]:
    """Class decorator registering an op lowering for one or more opset versions.

    Several versions may be given when the same implementation covers schema versions whose
    semantics differ only in ways the class reads from attributes or inputs itself.
    """
    versions = [since] if isinstance(since, int) else list(since)
    domain = canonical_domain(domain)

    def decorate(op_class: OpClass) -> OpClass:
        entries = _REGISTRY.setdefault((domain, op_type), [])
        for version in versions:
            if any(existing == version for existing, _ in entries):
                raise ValueError(f"{domain or 'ai.onnx'}::{op_type} v{version} registered twice")
            entry: tuple[int, type[Op]] = (version, op_class)
            bisect.insort(entries, entry, key=lambda entry: entry[0])
        op_class.domain = domain
        op_class.op_type = op_type
        op_class.since_versions = tuple(
            sorted({*getattr(op_class, "since_versions", ()), *versions})
        )
        return op_class

    return decorate


def find_op(domain: str, op_type: str, opset_version: int) -> tuple[int, type[Op]] | None:
    """The newest registration with ``since_version <= opset_version``, or None."""
    entries = _REGISTRY.get((canonical_domain(domain), op_type), [])
    position = bisect.bisect_right([version for version, _ in entries], opset_version)
    return entries[position - 1] if position else None


def lookup_op(domain: str, op_type: str, opset_version: int, node_name: str) -> type[Op]:
    found = find_op(domain, op_type, opset_version)
    if found is None:
        registered = [
            version for version, _ in _REGISTRY.get((canonical_domain(domain), op_type), [])
        ]
        detail = (
            f"lowerings exist only from opset versions {registered}"
            if registered
            else "there is no lowering for this op type"
        )
        raise UnsupportedOpError(
            f"Unsupported op '{op_type}' (domain '{domain or 'ai.onnx'}', opset version "
            f"{opset_version}) at node '{node_name}': {detail}"
        )
    return found[1]


def registered_ops() -> dict[tuple[str, str], list[int]]:
    """(domain, op_type) -> the since_versions registered, for documentation and tests."""
    return {key: [version for version, _ in entries] for key, entries in _REGISTRY.items()}
