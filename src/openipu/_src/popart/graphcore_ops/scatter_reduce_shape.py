"""ScatterReduce's checks of its axis, axis_size and indices, in the original's words
(willow/src/op/scatterreduce.cpp: ScatterReduceOp::setup, checkIndexBroadcasted and
expandIndicesBcastNdShape)."""

from __future__ import annotations

from collections.abc import Sequence

from openipu._src.popart.errors import popart_exception


def checked_axis(axis: int, rank: int, axis_size: int) -> int:
    """The axis made non-negative, once it and axis_size are known valid."""
    if axis_size <= 0:
        raise popart_exception(
            f"ScatterReduceOp axis_size = {axis_size} is not valid: must be > 0."
        )
    if not -rank <= axis <= rank - 1:
        raise popart_exception(
            f"ScatterReduceOp::setup axis = {axis} is outside the acceptable range "
            f"[{-rank}, {rank - 1}]"
        )
    return axis % rank


def expanded_indices_shape(
    indices: Sequence[int], data: Sequence[int], axis: int, grouped: bool
) -> list[int]:
    """The indices' shape with singleton dims inserted so it lines up with the data's: a
    vector (after the group dim) sits on the reduction axis; trailing dims are appended."""
    if len(indices) > len(data):
        raise popart_exception(
            f"Invalid rank for indices input. Indices rank {len(indices)} must be <= data "
            f"input rank {len(data)}."
        )
    start = int(grouped)
    expanded = list(indices)
    if len(indices) - start == 1:
        expanded[start:start] = [1] * (axis - start)
    expanded += [1] * (len(data) - len(expanded))
    if any(i > d for i, d in zip(expanded, data, strict=True)):
        raise popart_exception(
            f"Failed to expand 'indices' shape {list(indices)} to match 'src' shape "
            f"{list(data)} using reduction axis = {axis}."
        )
    return expanded


def is_index_broadcast(
    indices: Sequence[int], data: Sequence[int], axis: int, grouped: bool, enabled: bool
) -> bool:
    """Whether the indices are a vector along the axis, broadcast over the data's other dims.
    With broadcasting enabled anything between that and the data's own shape is refused;
    disabled, smaller indices pick the leading part of the data (as torch's scatter_reduce)."""
    if list(indices) == list(data):
        return False
    expanded = expanded_indices_shape(indices, data, axis, grouped)
    non_singleton = [d for d, size in enumerate(expanded) if size != 1]
    partial = len(non_singleton) != 1 + int(grouped) or non_singleton[int(grouped)] != axis
    if partial and enabled:
        raise popart_exception("Partial broadcasting of indices is not currently supported.")
    return enabled
