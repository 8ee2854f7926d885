"""Groups of replicas: `CommGroup`, `ReplicaGrouping` and `VariableSettings`.

A grouping of N replicas into groups of size k with stride s puts replica r in group
`(r % s) + (r // (s * k)) * s` at index `(r // s) % k`: consecutive groups have stride 1,
orthogonal groups stride N / k.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from openipu._src.popart.errors import popart_exception, popart_internal_exception
from openipu._src.popart.options.enums import CommGroupType, VariableRetrievalMode
from openipu._src.popart.options.typed_fields import INT, EnumOf, Option, TypedOptions
from openipu._src.popart.pybind_arguments import (
    INT64,
    STR,
    UINT,
    Arg,
    InstanceOf,
    ListOf,
    Signature,
    bind,
    binding,
    unnamed,
)
from openipu._src.popart.pybind_arguments import EnumOf as BoundEnum


class ReplicaGrouping:
    """N replicas split into groups of `groupSize` replicas `stride` apart."""

    def __init__(self, numReplicas: int, stride: int = 1, groupSize: int | None = None) -> None:  # noqa: N803
        group_size = numReplicas if groupSize is None else groupSize
        if numReplicas < 1 or stride < 1 or group_size < 1:
            raise popart_exception(
                f"ReplicaGrouping(numReplicas={numReplicas}, stride={stride}, "
                f"groupSize={group_size}): every value must be at least 1"
            )
        if numReplicas % (stride * group_size):
            raise popart_exception(
                f"ReplicaGrouping: {numReplicas} replicas cannot be split into groups of "
                f"{group_size} with stride {stride} (stride * groupSize must divide numReplicas)"
            )
        self._replicas = numReplicas
        self._stride = stride
        self._group_size = group_size

    def getNumReplicas(self) -> int:  # noqa: N802 - the original's names
        return self._replicas

    def getStride(self) -> int:  # noqa: N802
        return self._stride

    def getGroupSize(self) -> int:  # noqa: N802
        return self._group_size

    def getNumGroups(self) -> int:  # noqa: N802
        return self._replicas // self._group_size

    def getGroupAt(self, replica: int) -> int:  # noqa: N802
        self._check_replica(replica)
        stride, size = self._stride, self._group_size
        return replica % stride + (replica // (stride * size)) * stride

    def getIndexInGroupAt(self, replica: int) -> int:  # noqa: N802
        self._check_replica(replica)
        return (replica // self._stride) % self._group_size

    def getReplicaAt(self, group: int, index: int = 0) -> int:  # noqa: N802
        if not 0 <= group < self.getNumGroups() or not 0 <= index < self._group_size:
            raise popart_exception(
                f"ReplicaGrouping: no replica at group {group}, index {index} "
                f"({self.getNumGroups()} groups of {self._group_size})"
            )
        stride = self._stride
        return group % stride + (group // stride) * stride * self._group_size + index * stride

    def getReplicasAt(self, group: int) -> list[int]:  # noqa: N802
        return [self.getReplicaAt(group, index) for index in range(self._group_size)]

    def _check_replica(self, replica: int) -> None:
        if not 0 <= replica < self._replicas:
            raise popart_exception(
                f"ReplicaGrouping: replica {replica} is not in 0..{self._replicas - 1}"
            )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReplicaGrouping):
            return NotImplemented
        return (self._replicas, self._stride, self._group_size) == (
            other._replicas,
            other._stride,
            other._group_size,
        )

    def __hash__(self) -> int:
        return hash((self._replicas, self._stride, self._group_size))

    def __repr__(self) -> str:
        return (
            f"ReplicaGrouping(numReplicas={self._replicas}, stride={self._stride}, "
            f"groupSize={self._group_size})"
        )


class CommGroup(TypedOptions):
    """A sub-group of replicas: `CommGroup(type=CommGroupType.All, replicaGroupSize=0)`."""

    OPTIONS = {
        "type": Option(EnumOf(CommGroupType), CommGroupType.All),
        "replicaGroupSize": Option(INT, 0),
    }

    def toReplicaGrouping(self, numReplicas: int) -> ReplicaGrouping:  # noqa: N802, N803
        kind, size = self.type, self.replicaGroupSize
        if kind is CommGroupType.All:
            return ReplicaGrouping(numReplicas, 1, numReplicas)
        if kind is CommGroupType.Ungrouped:
            return ReplicaGrouping(numReplicas, 1, 1)
        if size < 1 or numReplicas % size:
            raise popart_exception(
                f"CommGroup({kind.name}, replicaGroupSize={size}): the group size must be at "
                f"least 1 and divide the {numReplicas} replicas"
            )
        if kind is CommGroupType.Consecutive:
            return ReplicaGrouping(numReplicas, 1, size)
        return ReplicaGrouping(numReplicas, numReplicas // size, size)


_VARIABLE_SETTINGS = "popart_core.VariableSettings"
_COMM_GROUP_ARG = Arg(
    "sharedVariableDomain_", InstanceOf(CommGroup, "popart._internal.ir.CommGroup")
)
_MODE = BoundEnum(VariableRetrievalMode, "popart_core.VariableRetrievalMode")
# The constructors python/popart/popart_core/popart.cpp binds (its VariableSettings class):
# there is no (stride, groupSize) overload in Python, and stride and groupSize are `unsigned`.
_VARIABLE_SETTINGS_SIGNATURES = (
    Signature(()),
    Signature((_COMM_GROUP_ARG,)),
    Signature((Arg("retrievalMode_", _MODE),)),
    Signature((_COMM_GROUP_ARG, Arg("retrievalMode_", _MODE))),
    Signature((Arg("stride", UINT), Arg("groupSize", UINT), Arg("mode", _MODE))),
)


# The methods popart.cpp binds (its VariableSettings class, python/popart/popart_core/
# popart.cpp:3404-3423): all without py::arg (positional only, shown as arg0...) but
# getGroupRepresentative's `group`, and none with a default (shapeOnReplica needs its name).
_Method = TypeVar("_Method", bound=Callable[..., Any])
_SHAPE = ListOf(INT64)  # popart::Shape, std::vector<int64_t>
_REPLICAS = unnamed(UINT)  # `unsigned replicaCount`


def _method(*args: Arg, returns: str) -> Callable[[_Method], _Method]:
    return binding(_VARIABLE_SETTINGS, *args, returns=returns)


def _check(passed: bool, check: str, detail: str, values: str) -> None:
    """A failed POPART_CHECK (willow/include/popart/util/expressionchecking.hpp): a
    popart::error worded "Check <expression> has failed. <detail> [<values>]"."""
    if not passed:
        suffix = f" [{values}]" if values else ""  # a unary check has none
        raise popart_exception(f"Check {check} has failed. {detail}{suffix}")


class VariableSettings:
    """How a weight is shared between replicas, and how many copies reach the host.

    `VariableSettings()`, `VariableSettings(CommGroup)`, `VariableSettings(retrievalMode)`,
    `VariableSettings(CommGroup, retrievalMode)` or `VariableSettings(stride, groupSize,
    mode)`; other arguments are pybind11's TypeError.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        index, values = bind(
            "__init__", _VARIABLE_SETTINGS_SIGNATURES, args, kwargs,
            owner=_VARIABLE_SETTINGS, constructor=True,
        )  # fmt: skip
        group = values.get("sharedVariableDomain_", CommGroup())
        self._use_comm_group = index != 4
        # The settings copy the CommGroup's type and size (willow/src/variablesettings.cpp).
        self._group_type: CommGroupType = group.type
        self._group_size: int = values["groupSize"] if index == 4 else group.replicaGroupSize
        self._stride: int = values.get("stride", 0)
        self._mode: VariableRetrievalMode = values.get(
            "retrievalMode_", values.get("mode", VariableRetrievalMode.OnePerGroup)
        )
        if index != 0:  # every constructor but the default one verifies
            self.verify()

    @_method(returns="popart._internal.ir.CommGroup")
    def getSharedVariableDomain(self) -> CommGroup:  # noqa: N802 - the original's names
        _check(
            self._use_comm_group,
            "useCommGroup",
            "The variable settings were not initialised using a `popart::CommGroup` instance.",
            "",
        )
        return CommGroup(self._group_type, self._group_size)

    @_method(returns="popart_core.VariableRetrievalMode")
    def getRetrievalMode(self) -> VariableRetrievalMode:  # noqa: N802
        return self._mode

    @_method(returns="popart._internal.ir.CommGroupType")
    def getCommGroupType(self) -> CommGroupType:  # noqa: N802
        # Settings made from a stride keep the default (value-initialised) type: All.
        return self._group_type

    @_method(returns="int")
    def getGroupSize(self) -> int:  # noqa: N802
        return self._group_size

    @_method(returns="bool")
    def isUsingCommGroup(self) -> bool:  # noqa: N802
        return self._use_comm_group

    @_method(returns="int")
    def getStride(self) -> int:  # noqa: N802
        # The binding is the no-argument VariableSettings::getStride(), the stride member,
        # which settings made from a CommGroup leave 0 (willow/src/variablesettings.cpp);
        # getReplicaGrouping(numReplicas).getStride() gives the real stride.
        return self._stride

    @_method(*_REPLICAS, returns="popart._internal.ir.ReplicaGrouping")
    def getReplicaGrouping(self, numReplicas: int) -> ReplicaGrouping:  # noqa: N802, N803
        if self._use_comm_group:
            return self.getSharedVariableDomain().toReplicaGrouping(numReplicas)
        return ReplicaGrouping(numReplicas, self._stride, self._group_size)

    def _sized_group(self) -> bool:
        return self._group_type in (CommGroupType.Consecutive, CommGroupType.Orthogonal)

    def _legal_size(self) -> None:
        if self._sized_group() and self._group_size < 1:
            raise popart_internal_exception(
                "Attempting to use 0 as a CommGroupSize, groups of type "
                f"{self._group_type.name} must have legal size.\n"
            )

    @_method(*_REPLICAS, returns="int")
    def getGroupCount(self, numReplicas: int) -> int:  # noqa: N802, N803
        if not self._use_comm_group:
            return self.getReplicaGrouping(numReplicas).getNumGroups()
        kind = self._group_type
        if kind is CommGroupType.Ungrouped or self._group_size == 1:
            return numReplicas
        if kind is CommGroupType.All:
            return 1
        self._legal_size()
        return numReplicas // self._group_size

    @_method(*_REPLICAS, returns="int")
    def getRealGroupSize(self, numReplicas: int) -> int:  # noqa: N802, N803
        if not self._use_comm_group:
            return self.getReplicaGrouping(numReplicas).getGroupSize()
        if self._group_type is CommGroupType.All:
            return numReplicas
        if self._group_type is CommGroupType.Ungrouped:
            return 1
        return self._group_size

    @_method(Arg("group", UINT), returns="int")
    def getGroupRepresentative(self, group: int) -> int:  # noqa: N802
        if not self._use_comm_group:
            # A grouping of just enough replicas for `group` to exist.
            replicas = self._group_size * self._stride * (group + 1)
            return self.getReplicaGrouping(replicas).getReplicaAt(group)
        if self._group_type is CommGroupType.All:
            return 0
        if self._group_type is CommGroupType.Consecutive:
            return group * self._group_size
        return group  # orthogonal and ungrouped groups start at their own index

    def _group_stride(self, numReplicas: int) -> int:
        if self._group_type is CommGroupType.Orthogonal:
            self._legal_size()
            return numReplicas // self._group_size
        return 1

    @_method(*_REPLICAS, returns="List[List[int]]")
    def groups(self, numReplicas: int) -> list[list[int]]:  # noqa: N803
        if not self._use_comm_group:
            grouping = self.getReplicaGrouping(numReplicas)
            return [grouping.getReplicasAt(group) for group in range(grouping.getNumGroups())]
        if self._group_type is CommGroupType.All:
            return [list(range(numReplicas))]
        if self._group_type is CommGroupType.Ungrouped:
            return [[replica] for replica in range(numReplicas)]
        stride, size = self._group_stride(numReplicas), self.getRealGroupSize(numReplicas)
        return [
            list(range(start, start + stride * size, stride))
            for start in map(self.getGroupRepresentative, range(self.getGroupCount(numReplicas)))
        ]

    @_method(*_REPLICAS, returns="int")
    def numReplicasReturningVariable(self, numReplicas: int) -> int:  # noqa: N802, N803
        if not self._use_comm_group:
            grouping = self.getReplicaGrouping(numReplicas)
            if self._mode is VariableRetrievalMode.AllReplicas:
                return grouping.getNumReplicas()
            return grouping.getNumGroups()
        if (
            self._mode is VariableRetrievalMode.AllReplicas
            or self._group_type is CommGroupType.Ungrouped
            or self._group_size == 1
        ):
            return numReplicas
        if self._group_type is CommGroupType.All:
            return 1
        self._legal_size()
        return numReplicas // self._group_size

    # The host holds one value per group (willow/src/variablesettings.cpp: shapeOnHost and
    # shapeOnReplica go by the group count, whatever the retrieval mode).

    @_method(*unnamed(_SHAPE, UINT), returns="List[int]")
    def shapeOnHost(self, shape: list[int], numReplicas: int) -> list[int]:  # noqa: N802, N803
        groups = self.getGroupCount(numReplicas)
        return [groups, *shape] if groups > 1 else list(shape)

    @_method(*unnamed(_SHAPE, UINT, STR), returns="List[int]")
    def shapeOnReplica(self, shape: list[int], numReplicas: int, name: str) -> list[int]:  # noqa: N802, N803
        groups = self.getGroupCount(numReplicas)
        if groups == 1:
            return list(shape)
        if not self._use_comm_group:
            # POPART_CHECKs: popart::errors (variablesettings.cpp, the grouping's shapeOnReplica).
            _check(
                len(shape) > 0,
                "shape.size() > 0",
                f"Tensor '{name}' should have at least one dimension when used with "
                "`popart::VariableSettings` with more than 1 replica groups.",
                f"{len(shape)} <= 0",
            )
            _check(
                groups == shape[0],
                "numGroups == shape[0]",
                f"Return mismatch with possibly appended outer dimension ({shape[0]}) of "
                f'Tensor: "{name}". should match numGroups: {groups}',
                f"{groups} != {shape[0]}",
            )
            return list(shape[1:])
        if not shape or shape[0] != groups:
            # willow/src/variablesettings.cpp: an internal_error (an empty shape is undefined
            # behaviour there; the same error here).
            outer = shape[0] if shape else "none"
            raise popart_internal_exception(
                f"Return mismatch with possibly appended outer dimension ({outer}) of Tensor: "
                f'"{name}". should match numGroups: {groups}'
            )
        return list(shape[1:])

    @_method(returns="None")
    def verify(self) -> None:
        if not self._use_comm_group:
            # willow/src/variablesettings.cpp, verify: POPART_CHECK_NEs (popart::errors), and a
            # group of one replica has stride 1.
            _check(
                self._stride != 0,
                "stride != 0",
                "The stride in a `popart::VariableSettings` must be a positive integer.",
                f"{self._stride} == 0",
            )
            _check(
                self._group_size != 0,
                "groupSize != 0",
                "The group size in a `popart::VariableSettings` must be a positive integer.",
                f"{self._group_size} == 0",
            )
            if self._group_size == 1:
                self._stride = 1
            return
        # An internal_error for a Consecutive or Orthogonal group of fewer than one replica;
        # every retrieval mode (AllReduceReplicas too) is valid.
        if self._sized_group() and self._group_size < 1:
            raise popart_internal_exception("VariableSettings had 1 errors!")

    def __repr__(self) -> str:
        # operator<< in variablesettings.cpp (its "stide" spelling).
        domain = (
            f"commGroupType={self._group_type.name}"
            if self._use_comm_group
            else f"stide={self._stride}"
        )
        return (
            f"VariableSettings({domain}, groupSize={self._group_size}, "
            f"retrievalMode={self._mode.name})"
        )
