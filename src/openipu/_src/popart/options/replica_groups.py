"""Groups of replicas: `CommGroup`, `ReplicaGrouping` and `VariableSettings`.

A grouping of N replicas into groups of size k with stride s puts replica r in group
`(r % s) + (r // (s * k)) * s` at index `(r // s) % k`: consecutive groups have stride 1,
orthogonal groups stride N / k.
"""

from __future__ import annotations

from typing import Any

from openipu._src.popart.errors import popart_exception, popart_internal_exception
from openipu._src.popart.options.enums import CommGroupType, VariableRetrievalMode
from openipu._src.popart.options.typed_fields import INT, EnumOf, Option, TypedOptions


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


class VariableSettings:
    """How a weight is shared between replicas, and how many copies reach the host.

    `VariableSettings()`, `VariableSettings(CommGroup)`, `VariableSettings(retrievalMode)` or
    `VariableSettings(CommGroup, retrievalMode)`.
    """

    def __init__(self, *args: Any) -> None:
        group, mode = CommGroup(), VariableRetrievalMode.OnePerGroup
        for arg in args:
            if isinstance(arg, CommGroup):
                group = arg
            elif isinstance(arg, VariableRetrievalMode):
                mode = arg
            else:
                raise popart_exception(
                    "VariableSettings takes a CommGroup and/or a VariableRetrievalMode, got "
                    f"{arg!r} ({type(arg).__name__})"
                )
        self._group = group
        self._mode = mode

    def getSharedVariableDomain(self) -> CommGroup:  # noqa: N802 - the original's names
        return self._group

    def getRetrievalMode(self) -> VariableRetrievalMode:  # noqa: N802
        return self._mode

    def getCommGroupType(self) -> CommGroupType:  # noqa: N802
        return self._group.type

    def getGroupSize(self) -> int:  # noqa: N802
        return self._group.replicaGroupSize

    def isUsingCommGroup(self) -> bool:  # noqa: N802
        return True

    def getStride(self) -> int:  # noqa: N802
        # The binding is the no-argument VariableSettings::getStride(), the stride member,
        # which settings made from a CommGroup leave 0 (willow/src/variablesettings.cpp);
        # getReplicaGrouping(numReplicas).getStride() gives the real stride.
        return 0

    def getReplicaGrouping(self, numReplicas: int) -> ReplicaGrouping:  # noqa: N802, N803
        return self._group.toReplicaGrouping(numReplicas)

    def getGroupCount(self, numReplicas: int) -> int:  # noqa: N802, N803
        return self.getReplicaGrouping(numReplicas).getNumGroups()

    def getRealGroupSize(self, numReplicas: int) -> int:  # noqa: N802, N803
        return self.getReplicaGrouping(numReplicas).getGroupSize()

    def getGroupRepresentative(self, group: int) -> int:  # noqa: N802
        kind, size = self._group.type, self._group.replicaGroupSize
        if kind is CommGroupType.All:
            return 0
        if kind is CommGroupType.Consecutive:
            return group * size
        return group  # orthogonal and ungrouped groups start at their own index

    def groups(self, numReplicas: int) -> list[list[int]]:  # noqa: N803
        grouping = self.getReplicaGrouping(numReplicas)
        return [grouping.getReplicasAt(group) for group in range(grouping.getNumGroups())]

    def numReplicasReturningVariable(self, numReplicas: int) -> int:  # noqa: N802, N803
        if self._mode is VariableRetrievalMode.AllReplicas:
            return numReplicas
        return self.getGroupCount(numReplicas)

    # The host holds one value per group (willow/src/variablesettings.cpp: shapeOnHost and
    # shapeOnReplica go by the group count, whatever the retrieval mode).

    def shapeOnHost(self, shape: list[int], numReplicas: int) -> list[int]:  # noqa: N802, N803
        groups = self.getGroupCount(numReplicas)
        return [groups, *shape] if groups > 1 else list(shape)

    def shapeOnReplica(self, shape: list[int], numReplicas: int, name: str = "") -> list[int]:  # noqa: N802, N803
        groups = self.getGroupCount(numReplicas)
        if groups == 1:
            return list(shape)
        if not shape or shape[0] != groups:
            # willow/src/variablesettings.cpp: an internal_error (an empty shape is undefined
            # behaviour there; the same error here).
            outer = shape[0] if shape else "none"
            raise popart_internal_exception(
                f"Return mismatch with possibly appended outer dimension ({outer}) of Tensor: "
                f'"{name}". should match numGroups: {groups} (its host shape is {list(shape)})'
            )
        return list(shape[1:])

    def verify(self) -> None:
        kind, size = self._group.type, self._group.replicaGroupSize
        # willow/src/variablesettings.cpp, verify: an internal_error; every retrieval mode
        # (AllReduceReplicas too) is valid.
        if kind in (CommGroupType.Consecutive, CommGroupType.Orthogonal) and size < 1:
            raise popart_internal_exception(
                f"VariableSettings had 1 errors! (a {kind.name} CommGroup needs "
                f"replicaGroupSize >= 1, got {size})"
            )

    def __repr__(self) -> str:
        return f"VariableSettings({self._group!r}, {self._mode.name})"
