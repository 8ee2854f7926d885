"""Freezing a traced function with the values of its captures given, not read.

TensorFlow's `convert_variables_to_constants_v2` reads each captured variable's value
eagerly. A function traced in a TF1 graph captures that graph's variables, whose values
exist only in a session: the caller reads them when the graph runs and gives them here.
TensorFlow has no public form of this, so this subclasses its converter's private data
class (tensorflow/python/framework/convert_to_constants.py `_FunctionConverterData`,
checked with TensorFlow 2.21), overriding only how a value is obtained.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np
from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework import convert_to_constants

TENSORFLOW_VERSIONS = ("2.21",)


class _GivenValues(convert_to_constants._FunctionConverterData):  # noqa: SLF001
    def __init__(self, func: Any, values: dict[int, np.ndarray], keep: set[str]) -> None:
        self._given = values  # before the base class reads them
        super().__init__(
            func=func,
            lower_control_flow=False,
            aggressive_inlining=False,
            variable_names_denylist=sorted(keep) or None,
        )

    def _eval(self, tensor: Any) -> np.ndarray:
        key = id(getattr(tensor, "handle", tensor))  # a variable is known by its handle
        if key not in self._given:
            raise ValueError(f"No value was given for the captured tensor {tensor!r}")
        return self._given[key]


def freeze_with_values(
    concrete: Any, values: dict[int, np.ndarray], keep: AbstractSet[str] = frozenset()
) -> tuple[graph_pb2.GraphDef, set[int]]:
    """`concrete`'s graph with every capture a constant of `values[id(captured tensor)]`,
    but those whose placeholder is named in `keep` (they stay inputs); and the indices of
    its inputs that became constants."""
    data = _GivenValues(concrete, values, set(keep))
    graph_def, converted = convert_to_constants._replace_variables_by_constants(  # noqa: SLF001
        converter_data=data
    )
    return graph_def, set(converted)
