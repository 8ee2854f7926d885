"""The output shape of ai.graphcore Reshape: its `shape` with 0 and -1 resolved.

PopART's custom Reshape is created with handleZero (willow/src/op/reshape.cpp,
`reshape1OpCreator` and `ReshapeBaseOp::finaliseShape`): a 0 copies the input's dim at the
same position and a single -1 takes what is left of the element count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def resolved_reshape(input_shape: Sequence[int | None], shape: Sequence[int]) -> list[int | None]:
    """`shape` with 0 and -1 resolved; None where an unknown input dim leaves it unknown.

    Raises ValueError with PopART's message for a shape PopART refuses.
    """
    bad = [dim for dim in shape if dim < -1]
    if bad:
        raise ValueError(
            f"Dimension, {bad[0]}, of new shape for Reshape cannot be smaller than -1."
        )
    resolved: list[int | None] = [
        (input_shape[axis] if dim == 0 and axis < len(input_shape) else dim)
        for axis, dim in enumerate(shape)
    ]
    if resolved.count(-1) > 1:
        raise ValueError(
            "shape input to ReshapeOp can only use -1 to specify one unknown dimension"
        )
    if -1 not in resolved:
        return resolved
    known = [dim for dim in resolved if dim != -1]
    if None in known or None in input_shape:
        return [None if dim == -1 else dim for dim in resolved]
    elements, rest = math.prod(input_shape), math.prod(known)  # type: ignore[arg-type]
    if rest == 0 or elements % rest != 0:
        raise ValueError("Incompatible inferred dimension, not whole number.")
    return [elements // rest if dim == -1 else dim for dim in resolved]
