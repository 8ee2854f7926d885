"""The enums of spec section 21.7 and the IPU orders of SelectionOrder."""

import pytest

from openipu._src.config import (
    DeviceConnectionType,
    ExecutionProfileType,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
    ipu_order,
)

SPEC_MEMBERS = [
    (DeviceConnectionType, ["ALWAYS", "ON_DEMAND", "PRE_COMPILE", "NEVER"]),
    (ExecutionProfileType, ["NO_PROFILE", "DEVICE_PROFILE", "IPU_PROFILE", "TILE_PROFILE"]),
    (MergeRemoteBuffersBehaviour, ["NO_MERGING", "MERGE", "IF_BENEFICIAL"]),
    (
        SchedulingAlgorithm,
        ["CHOOSE_BEST", "CLUSTERING", "POST_ORDER", "LOOK_AHEAD", "SHORTEST_PATH"],
    ),
    (SelectionOrder, ["AUTO", "ZIGZAG", "SNAKE", "HOOF"]),
    (StochasticRoundingBehaviour, ["OFF", "ON", "REPLICA_IDENTICAL_ONLY"]),
]


@pytest.mark.parametrize(("enum_class", "members"), SPEC_MEMBERS)
def test_enum_members_are_exactly_the_spec_ones(enum_class, members):
    assert [member.name for member in enum_class] == members
    assert enum_class.__doc__


# Spec section 21.7, SelectionOrder, for a Graphcore Pod with 16 IPUs.
ZIGZAG_16 = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
SNAKE_16 = [0, 1, 3, 2, 4, 5, 7, 6, 8, 9, 11, 10, 12, 13, 15, 14]
HOOF_16 = [0, 2, 4, 6, 8, 10, 12, 14, 15, 13, 11, 9, 7, 5, 3, 1]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        (SelectionOrder.ZIGZAG, ZIGZAG_16),
        (SelectionOrder.AUTO, ZIGZAG_16),
        (SelectionOrder.SNAKE, SNAKE_16),
        (SelectionOrder.HOOF, HOOF_16),
    ],
)
def test_spec_orders_for_16_ipus(order, expected):
    assert ipu_order(order, 16) == expected


# The pod ladder: IPU 2r and 2r + 1 share rung r; rungs link upwards in both columns.
def linked(a, b):
    return abs(a - b) == 2 or {a, b} == {a - a % 2, a - a % 2 + 1}


@pytest.mark.parametrize("num_ipus", [2, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("order", list(SelectionOrder))
def test_orders_are_permutations(order, num_ipus):
    assert sorted(ipu_order(order, num_ipus)) == list(range(num_ipus))


@pytest.mark.parametrize("num_ipus", [4, 8, 16, 32])
def test_snake_and_hoof_only_step_over_ipu_links(num_ipus):
    snake = ipu_order(SelectionOrder.SNAKE, num_ipus)
    hoof = ipu_order(SelectionOrder.HOOF, num_ipus)
    assert all(linked(a, b) for a, b in zip(snake, snake[1:], strict=False))
    assert all(linked(a, b) for a, b in zip(hoof, hoof[1:], strict=False))
    assert linked(hoof[-1], hoof[0])  # HOOF closes the ring.


def test_small_devices():
    assert ipu_order(SelectionOrder.SNAKE, 1) == [0]
    assert ipu_order(SelectionOrder.HOOF, 2) == [0, 1]
    assert ipu_order(SelectionOrder.SNAKE, 2) == [0, 1]
    assert ipu_order(SelectionOrder.HOOF, 4) == [0, 2, 3, 1]


@pytest.mark.parametrize("num_ipus", [0, -1, 2.0, True])
def test_bad_num_ipus(num_ipus):
    with pytest.raises(ValueError, match="num_ipus"):
        ipu_order(SelectionOrder.ZIGZAG, num_ipus)


def test_bad_selection_order():
    with pytest.raises(TypeError, match="SelectionOrder"):
        ipu_order("SNAKE", 4)
