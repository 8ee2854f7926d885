"""Attribute checks PopART makes of ai.graphcore operators both where the Builder adds one
and where the IR creates the op from a loaded model, in the original's words."""

from __future__ import annotations

from collections.abc import Sequence

from openipu._src.popart.errors import popart_exception


def refuse_zero_stride(strides: Sequence[int]) -> None:
    """Subsample's strides must not be zero (willow/src/builder.cpp, AiGraphcoreOpset1::
    subsample, and willow/src/op/subsample.cpp; operators_test/subsample_test.py)."""
    for index, stride in enumerate(strides):
        if stride == 0:
            raise popart_exception(f"Strides invalid. 0 stride at index {index}")
