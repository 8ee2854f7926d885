"""Where a training session keeps its variables: on chip, or off chip (streaming memory), and
whether replicated tensor sharding (RTS) splits them across the replicas.

The original decides this per tensor in its streaming-memory transform
(`willow/src/transforms/streamingmemoryopinserter.cpp`, `determineTensorLocation`):

- an entry of `SessionOptions.tensorLocationSettingsOverride` wins, as given;
- otherwise the settings of the tensor's kind: `weightTensorLocationSettings`,
  `optimizerStateTensorLocationSettings` (Accl___, Accl1/2/3___, Step___ ...) or
  `accumulatorTensorLocationSettings` (Accum___, and SGD1's combined Accl___ when gradient
  accumulation is on); a weight or optimizer state with fewer elements than
  `minElementsForOffChip` stays on chip, one with fewer than
  `minElementsForReplicatedTensorSharding` is not sharded, and without replication nothing
  is sharded ("[StreamingMemory] Unable to shard tensor ... due to lack of replication").

The emulation computes the same on the host either way (the numbers do not change, as on
the IPU); the cost model keeps off-chip variables out of the tiles' memory and counts a
sharded one's share per replica.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from openipu._src.popart import reserved_names
from openipu._src.popart.logging import python_logger
from openipu._src.popart.options.enums import ReplicatedTensorSharding, TensorStorage
from openipu._src.popart.session.reserved_tensors import state_prefixes

_logger = python_logger("transform")


class VariableGroup(enum.Enum):
    WEIGHT = "weight"
    OPTIMIZER_STATE = "optimizerState"
    ACCUMULATOR = "accumulator"


@dataclass(frozen=True)
class ResolvedLocation:
    off_chip: bool
    sharded: bool


def groups_of(tensor_id: str) -> set[VariableGroup]:
    """The kinds a variable belongs to by its name (willow/src/tensornames.cpp's prefixes);
    SGD1's Accl___ is both optimizer state and accumulator."""
    groups = set()
    if tensor_id.startswith(state_prefixes()):
        groups.add(VariableGroup.OPTIMIZER_STATE)
    if tensor_id.startswith(
        (reserved_names.reservedAccumPrefix(), reserved_names.reservedAcclPrefix())
    ):
        groups.add(VariableGroup.ACCUMULATOR)
    return groups or {VariableGroup.WEIGHT}


def _settings(options: Any, group: VariableGroup) -> Any:
    return getattr(options, f"{group.value}TensorLocationSettings")


def resolve(options: Any, elements: dict[str, int], replicas: int) -> dict[str, ResolvedLocation]:
    """The location of each variable (id -> number of elements) under SessionOptions."""
    accumulating = bool(options.enableGradientAccumulation) and options.accumulationFactor > 1
    overrides = dict(options.tensorLocationSettingsOverride)
    resolved = {}
    for tensor_id, count in elements.items():
        location = overrides.get(tensor_id)
        if location is not None:
            storage = location.storage
            sharding = location.replicatedTensorSharding
        else:
            storage, sharding = _from_settings(options, tensor_id, count, accumulating)
        if sharding == ReplicatedTensorSharding.On and replicas <= 1 and location is None:
            _logger.warning(
                "[StreamingMemory] Unable to shard tensor %s due to lack of replication",
                tensor_id,
            )
            sharding = ReplicatedTensorSharding.Off
        resolved[tensor_id] = ResolvedLocation(
            off_chip=storage == TensorStorage.OffChip,
            sharded=sharding == ReplicatedTensorSharding.On and replicas > 1,
        )
    return resolved


def _from_settings(
    options: Any, tensor_id: str, count: int, accumulating: bool
) -> tuple[TensorStorage, ReplicatedTensorSharding]:
    groups = groups_of(tensor_id)
    shared = groups == {VariableGroup.OPTIMIZER_STATE, VariableGroup.ACCUMULATOR}
    # The original applies the groups' settings in this order, the last one that applies
    # winning: a shared accumulator follows the accumulator settings only when accumulating.
    group = VariableGroup.WEIGHT
    if VariableGroup.OPTIMIZER_STATE in groups:
        group = VariableGroup.OPTIMIZER_STATE
    if VariableGroup.ACCUMULATOR in groups and not (shared and not accumulating):
        group = VariableGroup.ACCUMULATOR
    location = _settings(options, group).location
    storage, sharding = location.storage, location.replicatedTensorSharding
    sized = [g for g in (VariableGroup.WEIGHT, VariableGroup.OPTIMIZER_STATE) if g in groups]
    if storage == TensorStorage.OffChip:
        for kind in sized:
            if count < _settings(options, kind).minElementsForOffChip:
                storage, sharding = TensorStorage.OnChip, ReplicatedTensorSharding.Off
    if sharding == ReplicatedTensorSharding.On:
        for kind in sized:
            if count < _settings(options, kind).minElementsForReplicatedTensorSharding:
                sharding = ReplicatedTensorSharding.Off
    return storage, sharding
