"""`SyntheticDataCategory` and `use_synthetic_data_for`, read from `TF_POPLAR_FLAGS`.

`--use_synthetic_data` makes every category synthetic;
`--synthetic_data_categories=infeed,outfeed` (names of the enum members,
any case) makes only the listed ones synthetic.
"""

from __future__ import annotations

import enum

from openipu._src.config import poplar_flags


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
    return poplar_flags.is_synthetic(synthetic_data_category.name.lower())
