"""The physical IPU order behind each `SelectionOrder`.

The spec describes the orders on a Graphcore Pod of 16 IPUs laid out as a ladder: two
columns, IPU 2r on the left and 2r + 1 on the right of rung r, IPU-Links along each rung and
up each column. The same ladder rule extends to any number of IPUs.
"""

from openipu._src.config.enums import SelectionOrder


def ipu_order(selection_order: SelectionOrder, num_ipus: int) -> list[int]:
    """Returns the IPU that shard `i` is mapped to, for each shard `i` of a `num_ipus` device.

    `SelectionOrder.AUTO` picks ZIGZAG: openipu's emulated IPUs all talk to each other at the
    same cost, so there is nothing for an automatic choice to optimise.
    """
    if not isinstance(selection_order, SelectionOrder):
        raise TypeError(
            f"selection_order must be a SelectionOrder, got {selection_order!r} "
            f"of type {type(selection_order).__name__}"
        )
    if type(num_ipus) is not int or num_ipus < 1:
        raise ValueError(f"num_ipus must be a positive int, got {num_ipus!r}")

    if selection_order in (SelectionOrder.AUTO, SelectionOrder.ZIGZAG):
        return list(range(num_ipus))
    if selection_order is SelectionOrder.SNAKE:
        return _snake_order(num_ipus)
    return _hoof_order(num_ipus)


def _snake_order(num_ipus: int) -> list[int]:
    # Walk the rungs bottom to top, crossing each rung in the opposite direction to the one
    # below, so that every step is over an IPU-Link.
    order: list[int] = []
    for rung_start in range(0, num_ipus, 2):
        rung = [rung_start, rung_start + 1]
        if (rung_start // 2) % 2 == 1:
            rung.reverse()
        order.extend(ipu for ipu in rung if ipu < num_ipus)
    return order


def _hoof_order(num_ipus: int) -> list[int]:
    # Up the left column and down the right one: a ring, so last and first shards are adjacent.
    left_column = list(range(0, num_ipus, 2))
    right_column = list(range(1, num_ipus, 2))
    return left_column + right_column[::-1]
