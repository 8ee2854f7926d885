"""The `TF_POPLAR_FLAGS` environment variable, which programs use to switch IPU behaviours.

Parsed as the original parses it (tensorflow/compiler/plugin/poplar/driver/tools/flags.cc,
through tensorflow/compiler/xla/parse_flags_from_env.cc and
tensorflow/core/util/command_line_flags.cc; documented in docs/device_selection.rst):

- the value is a list of `--name` or `--name=value` switches (a value may be quoted with
  ' or "); parsing stops at the first word that does not start with "-". A value that does
  not start with "-" names a file holding the flags;
- every flag has a type: a boolean is `--name`, `--name=true` or `--name=false`; an integer
  must be a whole number. A value of the wrong form is logged ("Couldn't interpret value
  ...") and the flag keeps its default, as the original does;
- an unknown flag, an unknown synthetic data category, or `--synthetic_data_initializer`
  without synthetic data stop the original's process (`LOG(FATAL)`); here they raise a
  ValueError with the original's message when the flags are read
  (`configure_ipu_system`, feeds);
- `--help` logs the usage of every flag (once), as the original does when it compiles;
  `--null_data_feed` makes infeeds give the device no real data, as synthetic infeeds.

The original reads the variable once per process; openipu reads it whenever it changes,
so a program (or a test) may set it before each use.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
from typing import Any

logger = logging.getLogger("openipu.poplar_flags")

_ENV = "TF_POPLAR_FLAGS"
#: The data transfers synthetic data can replace (`utils.SyntheticDataCategory`).
SYNTHETIC_CATEGORIES = ("seed", "infeed", "outfeed", "hostembedding", "parameters")

#: name: (type, default, usage), in the original's parsing order (flags.cc `flag_list`;
#: a name that is a prefix of another is tried first, as there).
FLAGS: dict[str, tuple[str, object, str]] = {
    "help": ("bool", False, "Display all the flags infos. (bool)"),
    "use_synthetic_data": (
        "bool",
        False,
        "If enabled, there will be no data transfers between the host and the IPU(s). (bool)",
    ),
    "synthetic_data_initializer": (
        "string",
        "",
        "If set when using synthetic data, all the inputs to the graph can be initialized "
        "directly on the IPU either randomly (synthetic_data_initializer=random, uniform, "
        "normal) or to a constant value X (synthetic_data_initializer=int).",
    ),
    "use_ipu_model": (
        "bool",
        False,
        "If enabled, this computation will be executed on the IPU model. (bool)",
    ),
    "log_cycle_count": (
        "int",
        -1,
        "The tile to log number of cycles for main graph. No logging will be done if "
        "negative. (int=-1)",
    ),
    "while_loop_brute_force_max_trip_count": (
        "int",
        128,
        "How many iterations of a while loop are simulated to find its trip count. (int=128)",
    ),
    "max_compilation_threads": (
        "int",
        -1,
        "The maximum number of threads Poplar should use during compilation of the graph. (int=-1)",
    ),
    "max_infeed_threads": (
        "int",
        -1,
        "The maximum number of threads which each infeed queue is allowed to use when "
        "accessing data from datasets. (int=-1)",
    ),
    "executable_cache_path": ("string", "", "Path to the executable cache. (path)"),
    "dump_schedule_as_dot": ("bool", False, "Dumps the scheduler graph as a dot file."),
    "tensor_map_file_path": ("string", "", "Directory for tensor map dump files."),
    "fallback_scheduler": (
        "bool",
        False,
        "Use the sync list scheduler rather than the default one.",
    ),
    "allow_nans": ("bool", False, "will allow NaNs."),
    "null_data_feed": (
        "bool",
        False,
        "Don't provide data to an infeed, for performance measurement.",
    ),
    "show_progress_bar": (
        "string",
        "auto",
        'Whether to show the compilation progress bar. Either "true", "false" or "auto". '
        'Defaults to "auto".',
    ),
    "use_on_demand": (
        "bool",
        False,
        'When true, sets connection type to "ON_DEMAND", useful for CI.',
    ),
    "on_demand_device_poll_time": (
        "int",
        1000,
        'When using "ON_DEMAND" connection type, how often to poll for the device (in '
        "milliseconds). Minimum is 100ms.",
    ),
    "on_demand_device_timeout": (
        "int",
        3600000,
        "When using 'ON_DEMAND' connection type, how long to wait (in milliseconds) for a "
        "device before timing out.",
    ),
    "ipu_model_tiles": (
        "int",
        -1,
        "When using the Poplar IPUModel target, the number of tiles of the IPUModel device "
        "created (ignored if IPUConfig.ipu_model.tiles_per_ipu is set).",
    ),
    "sync_replica_start": (
        "bool",
        False,
        "Whether to synchronise the starting point of each replica's main program.",
    ),
    "enable_hlo_verifier": (
        "bool",
        False,
        "Whether to run the HLO verifier as an invariant checker before and after every HLO pass.",
    ),
    "disable_poplar_version_check": (
        "bool",
        False,
        "If set, the Poplar version check will be disabled.",
    ),
    "synthetic_data_categories": (
        "string",
        "",
        "A comma separated list of values that can be used for finer control over which kinds "
        "of data are made synthetic. Valid values are.. "
        "infeed/outfeed/seed/hostembedding/parameters.",
    ),
}


@dataclasses.dataclass(frozen=True)
class ParsedFlags:
    values: dict[str, Any]
    categories: frozenset[str]


_lock = threading.Lock()
_cache: dict[str, ParsedFlags] = {}
_help_logged = False


def poplar_flags() -> list[str]:
    """The switches of `TF_POPLAR_FLAGS`, split as the original splits them."""
    return _split(_source(os.environ.get(_ENV, "")))


def parsed() -> ParsedFlags:
    """The flags' values; raises `ValueError` where the original's process stops."""
    text = os.environ.get(_ENV, "")
    with _lock:
        flags = _cache.get(text)
        if flags is None:
            flags = _parse(_split(_source(text)))
            _cache[text] = flags
    return flags


def value(name: str) -> Any:
    """The value of flag `name` (its default when not given)."""
    return parsed().values[name]


def log_help_once() -> None:
    """`--help`: logs every flag's usage once (poplar_compiler.cc `PrintHelpString`)."""
    global _help_logged
    if value("help") and not _help_logged:
        _help_logged = True
        logger.info("%s", usage())


def usage() -> str:
    """flags.cc `GetFlagUsageString`."""
    lines = [f"Usage for {_ENV} is:"]
    lines += [f"\t--{name}: {text}" for name, (_, _, text) in FLAGS.items()]
    return "\n".join(lines) + "\n"


def use_synthetic_data() -> bool:
    """`--use_synthetic_data`: no data moves between host and device."""
    return bool(value("use_synthetic_data"))


def synthetic_categories() -> set[str]:
    """The categories `--synthetic_data_categories=infeed,outfeed` names."""
    return set(parsed().categories)


def is_synthetic(category: str) -> bool:
    """Whether synthetic data replaces the transfers of `category` (e.g. "infeed")."""
    return use_synthetic_data() or category in synthetic_categories()


def infeeds_without_data() -> bool:
    """Whether infeeds give the device no data of the dataset's: synthetic infeeds, or
    `--null_data_feed` (its infeed callbacks hand over uninitialised buffers,
    poplar_executor.cc `NullPrefetchCallback`)."""
    return is_synthetic("infeed") or bool(value("null_data_feed"))


def synthetic_data_initializer() -> str | int | None:
    """`--synthetic_data_initializer=X`: "uniform", "normal", an integer, or None (unset).

    A number's integer part is used (docs/device_selection.rst); anything else fails,
    as the original's `std::stoi` of it does (tools/data_initializer.cc).
    """
    text = value("synthetic_data_initializer")
    if text == "":
        return None
    if text == "random":  # tools/data_initializer.cc: the same as "uniform"
        return "uniform"
    if text in ("uniform", "normal"):
        return str(text)
    match = re.match(r"\s*[+-]?\d+", text)  # std::stoi reads a leading integer
    if match is None:
        raise ValueError(
            f"{_ENV}: --synthetic_data_initializer={text!r}: use uniform, normal or a number"
        )
    return int(match.group(0))


def use_ipu_model() -> bool:
    """`--use_ipu_model`: the program targets the IPU model (a simulator) rather than hardware.

    Read as the original's Python reads it (tensorflow/python/ipu/config.py and utils.py
    `running_on_ipu_model`): whether the variable's text holds "--use_ipu_model".
    """
    return "--use_ipu_model" in os.environ.get(_ENV, "")


# -- parsing -------------------------------------------------------------------------------


def _source(text: str) -> str:
    """The flags text: the variable, or the file it names (parse_flags_from_env.cc)."""
    stripped = text.lstrip(" \t\r\n")
    if not stripped or stripped.startswith("-"):
        return text
    try:
        with open(text) as file:
            return file.read()
    except OSError:
        raise ValueError(
            f'Could not open file "{text}" to read flags for environment variable "{_ENV}".  '
            f'(We assumed "{text}" was a file name because it did not start with a "--".)'
        ) from None


_NAME_CHARS = re.compile(r"[-_A-Za-z0-9]*")


def _split(text: str) -> list[str]:
    """parse_flags_from_env.cc `ParseArgvFromString`: words until one not starting with '-'."""
    words = []
    whitespace = " \t\r\n"
    i = len(text) - len(text.lstrip(whitespace))
    while i < len(text) and text[i] == "-":
        name = _NAME_CHARS.match(text, i)  # always matches (possibly empty)
        end = name.end() if name else i
        if end + 1 < len(text) and text[end] == "=" and text[end + 1] in "'\"":
            quote = text[end + 1]
            j = end + 2
            chars = []
            while j < len(text) and text[j] != quote:
                if quote == '"' and text[j] == "\\" and j + 1 < len(text):
                    j += 1
                chars.append(text[j])
                j += 1
            words.append(text[i : end + 1] + "".join(chars))
            end = min(j + 1, len(text))
        else:
            while end < len(text) and text[end] not in whitespace:
                end += 1
            words.append(text[i:end])
        i = end
        while i < len(text) and text[i] in whitespace:
            i += 1
    return words


def _parse(words: list[str]) -> ParsedFlags:
    values = {name: default for name, (_, default, _) in FLAGS.items()}
    unknown = []
    raw_categories = None
    for index, word in enumerate(words):
        if word == "--":
            unknown.extend(words[index:])
            break
        for name, (kind, _, _) in FLAGS.items():
            found, parsed_value = _match(word, name, kind)
            if not found:
                continue
            if parsed_value is not _BAD:
                if name == "synthetic_data_categories":
                    raw_categories = parsed_value
                values[name] = parsed_value
            break
        else:
            unknown.append(word)
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise ValueError(f"Unknown flag{plural} in {_ENV}: {' '.join(unknown)}")
    categories = set()
    if raw_categories is not None:
        for name in raw_categories.split(","):
            name = name.strip()
            if not name:
                continue
            if name not in SYNTHETIC_CATEGORIES:
                raise ValueError(
                    f"Using an unknown synthetic data category in: '{raw_categories}'\n"
                    f"Usage: {FLAGS['synthetic_data_categories'][2]}"
                )
            categories.add(name)
    if not values["use_synthetic_data"] and not categories and values["synthetic_data_initializer"]:
        raise ValueError(
            'The flag "synthetic_data_initializer" can only be used in combination with '
            '"use_synthetic_data" or "synthetic_data_categories".'
        )
    return ParsedFlags(values, frozenset(categories))


_BAD = object()


def _match(word: str, name: str, kind: str) -> tuple[bool, Any]:
    """(whether `word` is flag `name`, its value or `_BAD`): command_line_flags.cc."""
    prefix = f"--{name}"
    if not word.startswith(prefix):
        return False, None
    rest = word[len(prefix) :]
    if kind == "bool":
        if rest in ("", "=true"):
            return True, True
        if rest == "=false":
            return True, False
        return True, _bad(rest, name)
    if not rest.startswith("="):
        return False, None
    text = rest[1:]
    if kind == "int":
        if re.fullmatch(r"\s*[+-]?\d+", text) is None:
            return True, _bad(text, name)
        return True, int(text)
    return True, text


def _bad(text: str, name: str) -> object:
    logger.error("Couldn't interpret value %s for flag %s.", text, name)
    return _BAD
