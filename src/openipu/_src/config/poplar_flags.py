"""The `TF_POPLAR_FLAGS` environment variable, which programs use to switch IPU behaviours.

The flags are the original's (tensorflow/compiler/plugin/poplar/driver/tools/flags.cc,
documented in docs/device_selection.rst).
"""

from __future__ import annotations

import os

_CATEGORIES_FLAG = "--synthetic_data_categories="
_INITIALIZER_FLAG = "--synthetic_data_initializer="
#: The data transfers synthetic data can replace (`utils.SyntheticDataCategory`).
SYNTHETIC_CATEGORIES = ("seed", "infeed", "outfeed", "hostembedding", "parameters")


def poplar_flags() -> list[str]:
    return os.environ.get("TF_POPLAR_FLAGS", "").split()


def use_synthetic_data() -> bool:
    """`--use_synthetic_data`: no data moves between host and device."""
    return "--use_synthetic_data" in poplar_flags()


def synthetic_categories() -> set[str]:
    """The categories `--synthetic_data_categories=infeed,outfeed` names (lower case)."""
    categories = set()
    for flag in poplar_flags():
        if not flag.startswith(_CATEGORIES_FLAG):
            continue
        for name in flag[len(_CATEGORIES_FLAG) :].strip("'\"").split(","):
            name = name.strip().lower()
            if not name:
                continue
            if name not in SYNTHETIC_CATEGORIES:
                raise ValueError(
                    f"TF_POPLAR_FLAGS: unknown synthetic data category {name!r} in {flag!r}; "
                    f"the categories are {', '.join(sorted(SYNTHETIC_CATEGORIES))}"
                )
            categories.add(name)
    return categories


def is_synthetic(category: str) -> bool:
    """Whether synthetic data replaces the transfers of `category` (e.g. "infeed")."""
    return use_synthetic_data() or category in synthetic_categories()


def synthetic_data_initializer() -> str | int | None:
    """`--synthetic_data_initializer=X`: "uniform", "normal", an integer, or None (unset).

    A number's integer part is used (docs/device_selection.rst); anything else fails,
    as the original's `std::stoi` of it does (tools/data_initializer.cc).
    """
    value = None
    for flag in poplar_flags():
        if flag.startswith(_INITIALIZER_FLAG):
            value = flag[len(_INITIALIZER_FLAG) :].strip("'\"")
    if value == "random":  # tools/data_initializer.cc: the same as "uniform"
        return "uniform"
    if value is None or value in ("uniform", "normal"):
        return value
    try:
        return int(float(value))
    except ValueError:
        raise ValueError(
            f"TF_POPLAR_FLAGS: --synthetic_data_initializer={value!r}: use uniform, normal "
            "or a number"
        ) from None


def use_ipu_model() -> bool:
    """`--use_ipu_model`: the program targets the IPU model (a simulator) rather than hardware."""
    return "--use_ipu_model" in poplar_flags()
