"""`SyntheticDataCategory` and `use_synthetic_data_for`, read from `TF_POPLAR_FLAGS`.

`--use_synthetic_data` makes every category synthetic;
`--synthetic_data_categories=infeed,outfeed` (names of the enum members,
any case) makes only the listed ones synthetic.
"""

from __future__ import annotations

import enum

from openipu._src.config import poplar_flags

_CATEGORIES_FLAG = "--synthetic_data_categories="


class SyntheticDataCategory(enum.Enum):
    """The kinds of host-device data transfer that synthetic data can replace."""

    Seed = 0
    Infeed = 1
    Outfeed = 2
    HostEmbedding = 3
    Parameters = 4


def use_synthetic_data_for(synthetic_data_category: SyntheticDataCategory) -> bool:
    """Whether synthetic data replaces the transfers of `synthetic_data_category`."""
    if not isinstance(synthetic_data_category, SyntheticDataCategory):
        raise TypeError(
            "use_synthetic_data_for needs a SyntheticDataCategory value (such as "
            f"SyntheticDataCategory.Infeed), got {synthetic_data_category!r}"
        )
    if poplar_flags.use_synthetic_data():
        return True
    return synthetic_data_category in _categories_from_flags()


def _categories_from_flags() -> set[SyntheticDataCategory]:
    by_name = {category.name.lower(): category for category in SyntheticDataCategory}
    categories = set()
    for flag in poplar_flags.poplar_flags():
        if not flag.startswith(_CATEGORIES_FLAG):
            continue
        for name in flag[len(_CATEGORIES_FLAG) :].strip("'\"").split(","):
            name = name.strip().lower()
            if not name:
                continue
            if name not in by_name:
                raise ValueError(
                    f"TF_POPLAR_FLAGS: unknown synthetic data category {name!r} in {flag!r}; "
                    f"the categories are {', '.join(sorted(by_name))}"
                )
            categories.add(by_name[name])
    return categories
