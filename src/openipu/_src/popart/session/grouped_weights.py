"""Weights whose `VariableSettings` group the replicas: one value per group of replicas.

A weight added with `addInitializedInputTensor(value, VariableSettings(CommGroup(...)))` has
one value per group of replicas: on the host a leading [groups] axis (`shapeOnHost`), on
each replica its group's row (`shapeOnReplica`; willow/src/tensors.cpp, addInit). The
replicas of a group hold the same value and train it together: a weight's gradient is summed
over the replicas of its group only (willow/src/patterns/optimizerdecompose.cpp, gradReduce:
an all-reduce over the variable's replica grouping), so groups train independently. Its
optimizer state is grouped the same way (addStateTensor takes the weight's settings).

Here the session's program sees each replica's shape (`replica_model`), and the device
variable holds every group's value, laid out as on the host. Every replica's copy of it stays
the same: a replica reads its group's row (`replica_row`), and an update gathers the new row
of every group's representative into the whole variable, which every replica stores
(`gathered_rows`). The host writes and reads `[groups, ...]`; with
`VariableRetrievalMode.AllReplicas` reads give `[replicas, ...]`, each replica's group's value
(willow/src/popx/devicex.cpp, weightsToHost: one copy per replica returning the variable).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import onnx
import tensorflow as tf

from openipu._src.engine.replicas import lockstep
from openipu._src.popart.builder import annotation_names
from openipu._src.popart.builder.initializer_layout import popart_initializer
from openipu._src.popart.errors import popart_exception
from openipu._src.popart.external_data import initializer_array
from openipu._src.popart.options.enums import CommGroupType, VariableRetrievalMode
from openipu._src.popart.options.replica_groups import (
    CommGroup,
    ReplicaGrouping,
    VariableSettings,
)


@dataclass(frozen=True)
class GroupedVariable:
    """How one weight is shared between the replicas, and how many copies the host reads."""

    grouping: ReplicaGrouping
    returned: int  # copies the host reads (numReplicasReturningVariable)

    @property
    def groups(self) -> int:
        return self.grouping.getNumGroups()

    @property
    def split(self) -> bool:
        """Whether the replicas hold different values (more than one group)."""
        return self.groups > 1

    def replica_rows(self) -> list[int]:
        """The group of each replica."""
        return [self.grouping.getGroupAt(r) for r in range(self.grouping.getNumReplicas())]

    def representatives(self) -> list[int]:
        """The first replica of each group."""
        return [self.grouping.getReplicaAt(group) for group in range(self.groups)]

    def host_copies(self, value: np.ndarray) -> np.ndarray:
        """What the host reads of the variable's `value` (laid out as on the host)."""
        if self.returned == self.groups:
            return value
        per_group = value if self.split else value[None]
        return per_group[self.replica_rows()]

    def from_host_copies(self, array: np.ndarray, host_shape: tuple[int, ...]) -> np.ndarray:
        """The variable's value from an array the user wrote: laid out as on the host, or with
        one copy per returning replica (each group's representative's copy counts)."""
        size = int(np.prod(host_shape, dtype=np.int64))
        if self.returned != self.groups and array.size * self.groups == size * self.returned:
            copies = array.reshape(self.returned, -1)[self.representatives()]
            return copies.reshape(host_shape)
        return np.asarray(array).reshape(host_shape)


def plan(model: onnx.ModelProto, replicas: int) -> dict[str, GroupedVariable]:
    """The model's weights whose settings give more than one value or copy (builder
    metadata `__variable_settings:<id>`), checked against their initializers' shapes."""
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    grouped = {}
    for entry in model.metadata_props:
        if not entry.key.startswith(annotation_names.VARIABLE_SETTINGS_PREFIX):
            continue
        name = entry.key[len(annotation_names.VARIABLE_SETTINGS_PREFIX) :]
        if name not in initializers:
            continue
        fields = json.loads(entry.value or "{}")
        group = CommGroup(
            CommGroupType[fields.get("commGroupType", "All")], fields.get("replicaGroupSize", 0)
        )
        settings = VariableSettings(
            group, VariableRetrievalMode[fields.get("retrievalMode", "OnePerGroup")]
        )
        variable = GroupedVariable(
            settings.getReplicaGrouping(replicas), settings.numReplicasReturningVariable(replicas)
        )
        if variable.groups == 1 and variable.returned == 1:
            continue
        # The original refuses a host value without the group axis (variablesettings.cpp).
        settings.shapeOnReplica(list(initializers[name].dims), replicas, name)
        grouped[name] = variable
    return grouped


def host_values(
    model: onnx.ModelProto, grouped: dict[str, GroupedVariable]
) -> dict[str, np.ndarray]:
    """The whole host values of the split weights (every group's)."""
    return {
        tensor.name: initializer_array(tensor)
        for tensor in model.graph.initializer
        if tensor.name in grouped and grouped[tensor.name].split
    }


def replica_model(model: onnx.ModelProto, grouped: dict[str, GroupedVariable]) -> onnx.ModelProto:
    """The model as one replica sees it: each split weight is its first group's row."""
    split = {name for name, variable in grouped.items() if variable.split}
    if not split:
        return model
    replica = onnx.ModelProto()
    replica.CopyFrom(model)
    graph = replica.graph
    for index, tensor in enumerate(graph.initializer):
        if tensor.name in split:
            graph.initializer[index].CopyFrom(
                popart_initializer(initializer_array(tensor)[0], tensor.name)
            )
    for value in graph.input:
        if value.name in split and value.type.tensor_type.shape.dim:
            del value.type.tensor_type.shape.dim[0]
    # Shapes the builder recorded from the host shapes: inference works them out again.
    del graph.value_info[:]
    for value in graph.output:
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    return replica


# -- inside a step (each replica's Python) -------------------------------------------------------


def replica_row(value: tf.Tensor, variable: GroupedVariable) -> tf.Tensor:
    """The row of the replica being built: its group's value."""
    grouping = variable.grouping
    return lockstep.per_replica(lambda index, whole: whole[grouping.getGroupAt(index)], value)


def gathered_rows(row: tf.Tensor, variable: GroupedVariable) -> tf.Tensor:
    """Every group's value, `[groups, ...]`: the `row` of each group's representative."""
    representatives = variable.representatives()

    def combine(rows: list[tf.Tensor]) -> list[tf.Tensor]:
        _check_replicas(len(rows), variable)
        whole = tf.stack([rows[replica] for replica in representatives])
        return [whole] * len(rows)

    return lockstep.exchange(row, combine, "a grouped variable's update")


def sum_within_groups(value: tf.Tensor, variable: GroupedVariable) -> tf.Tensor:
    """`value` summed over the replicas of this replica's group of `variable`."""
    grouping = variable.grouping

    def combine(values: list[tf.Tensor]) -> list[tf.Tensor]:
        _check_replicas(len(values), variable)
        sums = [
            tf.add_n([values[r] for r in grouping.getReplicasAt(g)]) for g in range(variable.groups)
        ]
        return [sums[grouping.getGroupAt(r)] for r in range(len(values))]

    return lockstep.exchange(value, combine, "a grouped variable's gradient reduction")


def _check_replicas(count: int, variable: GroupedVariable) -> None:
    if count != variable.grouping.getNumReplicas():
        raise popart_exception(
            f"A weight grouped over {variable.grouping.getNumReplicas()} replicas is used by a "
            f"program of {count} replica(s)"
        )
