"""Rules of `IPUConfig` that involve more than one option or more than a value's type.

Each rule returns the problems it finds as messages that name the option, its value and what
is allowed; `validate_ipu_config` reports all of them at once so that a user fixes a config
in one go.
"""

import warnings
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from openipu._src.config import poplar_flags
from openipu._src.config.enums import DeviceConnectionType

if TYPE_CHECKING:
    from openipu._src.config.ipu_config import IPUConfig

IPU_VERSIONS = ("ipu1", "ipu2", "ipu21")

_OFFLINE_CONNECTION_TYPES = (DeviceConnectionType.PRE_COMPILE, DeviceConnectionType.NEVER)


def _as_list(selection: int | list[int] | tuple[int, ...]) -> list[int]:
    return [selection] if isinstance(selection, int) else list(selection)


def _is_set(selection: int | list[int] | tuple[int, ...]) -> bool:
    # An int is always a choice, even 0 (the first device configuration of select_ipus).
    return isinstance(selection, int) or len(selection) > 0


def _check_device_connection_version(config: "IPUConfig") -> list[str]:
    connection = config.device_connection
    allowed = ", ".join(f'"{version}"' for version in (*IPU_VERSIONS, ""))
    if connection.version not in (*IPU_VERSIONS, ""):
        return [
            f"device_connection.version is {connection.version!r}, but must be one of {allowed}"
        ]
    if connection.type in _OFFLINE_CONNECTION_TYPES and connection.version == "":
        return [
            "device_connection.version must be set when device_connection.type is "
            "DeviceConnectionType.NEVER or DeviceConnectionType.PRE_COMPILE (it is "
            f'"" and device_connection.type is {connection.type}; one of '
            f"{', '.join(repr(v) for v in IPU_VERSIONS)}): without a device to query, the IPU "
            "architecture to compile for must be given"
        ]
    if connection.type not in _OFFLINE_CONNECTION_TYPES and connection.version != "":
        warnings.warn(
            f"device_connection.version is {connection.version!r} but is only used when "
            f"device_connection.type is PRE_COMPILE or NEVER, not {connection.type}; it is "
            "ignored",
            UserWarning,
            stacklevel=4,
        )
    return []


def _check_multi_replica_distribution(config: "IPUConfig") -> list[str]:
    distribution = config.experimental.multi_replica_distribution
    count, index = distribution.process_count, distribution.process_index
    if count < 0:
        return [
            f"experimental.multi_replica_distribution.process_count is {count}, but must be "
            ">= 0 (0 turns multi-replica distribution off)"
        ]
    if count > 0 and not 0 <= index < count:
        return [
            "experimental.multi_replica_distribution.process_index must be in the range "
            "[0, experimental.multi_replica_distribution.process_count) (process_index is "
            f"{index}, so not in [0, {count}))"
        ]
    return []


def _check_io_tiles(config: "IPUConfig") -> list[str]:
    io_tiles = config.io_tiles
    if io_tiles.num_io_tiles < 0:
        return [f"io_tiles.num_io_tiles is {io_tiles.num_io_tiles}, but must be >= 0"]
    if io_tiles.place_ops_on_io_tiles and io_tiles.num_io_tiles == 0:
        return [
            "Cannot place ops on I/O tiles when io_tiles.num_io_tiles == 0 "
            "(io_tiles.place_ops_on_io_tiles is True)"
        ]
    return []


def _check_distributed_batch_norm(config: "IPUConfig") -> list[str]:
    name = "norms.experimental.distributed_batch_norm_replica_group_size"
    group_size = config.norms.experimental.distributed_batch_norm_replica_group_size
    if group_size < 1:
        return [f"{name} must be at least 1 (it is {group_size})"]
    if group_size > 1 and config.io_tiles.num_io_tiles > 0:
        return [
            f"{name} is not supported with I/O tiles. (It is {group_size} and "
            f"io_tiles.num_io_tiles is {config.io_tiles.num_io_tiles}; it must be 1 when I/O "
            "tiles are used)"
        ]
    return []


def _check_ipu_selection(config: "IPUConfig") -> list[str]:
    problems = []
    if _is_set(config.auto_select_ipus) and _is_set(config.select_ipus):
        problems.append(
            "Only one of `auto_select_ipus` and `select_ipus` can be set. (auto_select_ipus "
            f"is {config.auto_select_ipus!r} and select_ipus is {config.select_ipus!r})"
        )
    bad_counts = [count for count in _as_list(config.auto_select_ipus) if count < 1]
    if bad_counts:
        problems.append(
            f"auto_select_ipus is {config.auto_select_ipus!r}, but every number of IPUs must be "
            f">= 1 (got {', '.join(map(str, bad_counts))})"
        )
    indices = _as_list(config.select_ipus)
    negative = [index for index in indices if index < 0]
    if negative:
        problems.append(
            f"select_ipus is {config.select_ipus!r}, but device configuration indices must be "
            f">= 0 (got {', '.join(map(str, negative))})"
        )
    duplicates = sorted(index for index, times in Counter(indices).items() if times > 1)
    if duplicates:
        problems.append(
            f"All MultiIPU indices in `select_ipus` must be unique. (select_ipus is "
            f"{config.select_ipus!r}; repeated: {', '.join(map(str, duplicates))})"
        )
    return problems


def _check_ipu_model(config: "IPUConfig") -> list[str]:
    """The IPU model's own rules, which apply only when the program targets it
    (`--use_ipu_model`): tensorflow/python/ipu/config.py checks the first three when it
    converts the config, and Poplar refuses a model of an unknown version. Without the model
    the original ignores `ipu_model`, whatever its values (a negative tiles_per_ipu, say)."""
    if not poplar_flags.use_ipu_model():
        return []
    problems = []
    version = config.ipu_model.version
    if version == "":
        problems.append('ipu_model.version must be set when using the IPUModel (it is "")')
    elif version not in IPU_VERSIONS:
        problems.append(
            f"ipu_model.version is {version!r}, but the IPUModel has the versions "
            f"{', '.join(repr(v) for v in IPU_VERSIONS)}"
        )
    if config.experimental.multi_replica_distribution.process_count > 0:
        problems.append(
            "Multi-replica distribution is not supported on the IPU model. "
            "(experimental.multi_replica_distribution.process_count is "
            f"{config.experimental.multi_replica_distribution.process_count})"
        )
    if _is_set(config.select_ipus):
        problems.append(
            "When using the IPUModel, the devices to attach to can only be specified with "
            f"`auto_select_ipus`. (select_ipus is {config.select_ipus!r})"
        )
    return problems


_RULES: tuple[Callable[["IPUConfig"], list[str]], ...] = (
    _check_ipu_selection,
    _check_ipu_model,
    _check_device_connection_version,
    _check_multi_replica_distribution,
    _check_io_tiles,
    _check_distributed_batch_norm,
)


def validate_ipu_config(config: "IPUConfig") -> None:
    """Raises a ValueError describing every rule `config` breaks, if any."""
    problems = [problem for rule in _RULES for problem in rule(config)]
    if len(problems) == 1:
        # The message starts with the original's words for the rule, which programs match.
        raise ValueError(problems[0])
    if problems:
        listing = "\n".join(f"  - {problem}" for problem in problems)
        raise ValueError(f"Invalid IPUConfig, {len(problems)} problems:\n{listing}")
