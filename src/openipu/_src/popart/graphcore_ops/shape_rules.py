"""Shape rules of the ai.graphcore operators: who types a node's outputs from its inputs.

The rules themselves live with the builder's shape inference
(builder/graphcore_shape_rules.py, they need its data types); they register here, one per
operator the table declares `typed`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from onnx import NodeProto

from openipu._src.popart.graphcore_ops.table import op_spec


@dataclass(frozen=True)
class TensorType:
    """An element type and a shape whose dims (or whole shape) may be unknown (None)."""

    elem_type: int
    shape: tuple[int | None, ...] | None


# (node, input types, attribute values with the table's defaults) -> output types
Rule = Callable[[NodeProto, Sequence[TensorType | None], dict[str, Any]], list[TensorType | None]]
_RULES: dict[str, Rule] = {}


def register_shape_rule(*op_types: str) -> Callable[[Rule], Rule]:
    """Decorator: `rule` types the outputs of these (typed) operators."""

    def register(rule: Rule) -> Rule:
        for op_type in op_types:
            if not op_spec(op_type).typed:
                raise ValueError(f"{op_type} is not declared typed in the ai.graphcore table")
            if op_type in _RULES:
                raise ValueError(f"{op_type}: shape rule registered twice")
            _RULES[op_type] = rule
        return rule

    return register


def shape_rule(op_type: str) -> Rule | None:
    """The registered rule of an operator, or None."""
    return _RULES.get(op_type)
