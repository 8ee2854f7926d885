"""Encodings of session-side setting objects that builder methods accept.

`TensorLocation`, `CommGroup`, `InputSettings` and `VariableSettings` belong to
the session API; the builder only has to write them into the ONNX model. It
reads them by attribute (duck typing) so it does not depend on their module,
and takes enum members by name so any enum class with the original's member
names works. An object that is not one of them is the TypeError pybind11 raises
for an argument of the wrong type.
"""

from __future__ import annotations

import enum
import json
from typing import Any

from openipu._src.popart.builder.enums import CommGroupType
from openipu._src.popart.errors import IncompatibleArgumentsError, popart_exception

_TENSOR_STORAGE = {"OnChip": 0, "OffChip": 1}
_TILE_SET = {"Compute": 0, "IO": 1}
_REPLICATED_TENSOR_SHARDING = {"Off": 0, "On": 1}
_COMM_GROUP_TYPE = {member.name: member.value for member in CommGroupType}


def _enum_value(value: Any, values: dict[str, int], what: str) -> int:
    name = value.name if isinstance(value, enum.Enum) else value
    if isinstance(name, str) and name in values:
        return values[name]
    if isinstance(value, int) and not isinstance(value, bool) and value in values.values():
        return value
    raise popart_exception(f"{what}: {value!r} is not one of {', '.join(values)}")


def _read(owner: Any, name: str) -> Any:
    """An attribute that the original exposes as a property or as a getter method."""
    value = getattr(owner, name)
    return value() if callable(value) and not isinstance(value, enum.Enum) else value


def _name_of(value: Any) -> Any:
    return value.name if isinstance(value, enum.Enum) else value


def encode_comm_group(comm_group: Any) -> list[int]:
    """[CommGroupType value, replica group size] of a CommGroup or a (type, size) pair."""
    if isinstance(comm_group, (tuple, list)) and len(comm_group) == 2:
        group_type, group_size = comm_group
    elif hasattr(comm_group, "type") and hasattr(comm_group, "replicaGroupSize"):
        group_type, group_size = _read(comm_group, "type"), _read(comm_group, "replicaGroupSize")
    else:
        raise IncompatibleArgumentsError(f"commGroup: {comm_group!r} is not a CommGroup")
    return [_enum_value(group_type, _COMM_GROUP_TYPE, "commGroup type"), int(group_size)]


def encode_tensor_location(location: Any) -> list[int]:
    """[storage, loadTileSet, storageTileSet, replicatedTensorSharding, shardingDomain type, size].

    None stands for the default location: on chip, compute tiles, not sharded.
    """
    if location is None:
        return [0, 0, 0, 0, 0, 0]
    try:
        encoded = [
            _enum_value(_read(location, "storage"), _TENSOR_STORAGE, "storage"),
            _enum_value(_read(location, "loadTileSet"), _TILE_SET, "loadTileSet"),
            _enum_value(_read(location, "storageTileSet"), _TILE_SET, "storageTileSet"),
            _enum_value(
                _read(location, "replicatedTensorSharding"),
                _REPLICATED_TENSOR_SHARDING,
                "replicatedTensorSharding",
            ),
        ]
    except AttributeError as error:
        raise IncompatibleArgumentsError(f"{location!r} is not a TensorLocation: {error}") from None
    domain = getattr(location, "shardingDomain", None)
    encoded += (
        encode_comm_group(_read(location, "shardingDomain")) if domain is not None else [0, 0]
    )
    return encoded


def decode_tensor_location(encoded: list[int]) -> dict[str, Any]:
    """The readable form of `encode_tensor_location`'s output."""

    def name(values: dict[str, int], value: int) -> str:
        return next(key for key, number in values.items() if number == value)

    storage, load_tiles, storage_tiles, sharding, group_type, group_size = (list(encoded) + [0, 0])[
        :6
    ]
    return {
        "storage": name(_TENSOR_STORAGE, storage),
        "loadTileSet": name(_TILE_SET, load_tiles),
        "storageTileSet": name(_TILE_SET, storage_tiles),
        "replicatedTensorSharding": name(_REPLICATED_TENSOR_SHARDING, sharding),
        "shardingDomain": (name(_COMM_GROUP_TYPE, group_type), group_size),
    }


def encode_input_settings(settings: Any) -> str:
    """JSON with the member names of an InputSettings' tile set, exchange strategy and stream mode."""
    fields = {}
    for field in ("tileSet", "exchangeStrategy", "replicatedStreamMode"):
        if hasattr(settings, field):
            fields[field] = _name_of(_read(settings, field))
    if not fields:
        raise IncompatibleArgumentsError(f"{settings!r} is not an InputSettings")
    return json.dumps(fields, sort_keys=True)


def encode_variable_settings(settings: Any) -> str:
    """JSON with the shared-variable domain and retrieval mode of a VariableSettings."""
    fields: dict[str, Any] = {}
    if hasattr(settings, "getSharedVariableDomain"):
        group_type, group_size = encode_comm_group(settings.getSharedVariableDomain())
        fields["commGroupType"] = CommGroupType(group_type).name
        fields["replicaGroupSize"] = group_size
    if hasattr(settings, "getRetrievalMode"):
        fields["retrievalMode"] = _name_of(settings.getRetrievalMode())
    if not fields:
        raise IncompatibleArgumentsError(f"{settings!r} is not a VariableSettings")
    return json.dumps(fields, sort_keys=True)
