"""The ai.graphcore operators declared once (`table.py`): inputs, outputs, attributes with
their ONNX types and defaults, and their shape rules (`shape_rules.py`).

Below both the builder and the lowering: it imports neither, and both read it.
"""

from openipu._src.popart.graphcore_ops.spec import ABSENT, REQUIRED, Attribute, OpSpec
from openipu._src.popart.graphcore_ops.table import GRAPHCORE_OPS, op_spec

__all__ = ["ABSENT", "GRAPHCORE_OPS", "REQUIRED", "Attribute", "OpSpec", "op_spec"]
