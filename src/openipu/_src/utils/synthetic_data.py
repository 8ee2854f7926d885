"""`SyntheticDataCategory` and `use_synthetic_data_for`, read from `TF_POPLAR_FLAGS`.

`--use_synthetic_data` makes every category synthetic;
`--synthetic_data_categories=infeed,outfeed` (names of the enum members,
any case) makes only the listed ones synthetic.
"""

from __future__ import annotations

from tensorflow.python.framework import errors

from openipu._src.config import poplar_flags

# As the original's utils.py: config.proto's protobuf enum, whose members are plain ints
# (`SyntheticDataCategory.Infeed == config_pb2.Infeed == 1`).
from openipu._src.config.ipu_options_proto import SyntheticDataCategory


def use_synthetic_data_for(synthetic_data_category: int) -> bool:
    """Whether synthetic data replaces the transfers of `synthetic_data_category`."""
    # The original passes the value as an int attribute of its op, which refuses non-ints.
    if isinstance(synthetic_data_category, bool) or not isinstance(synthetic_data_category, int):
        raise TypeError(
            "use_synthetic_data_for needs a SyntheticDataCategory value (an int such as "
            f"SyntheticDataCategory.Infeed), got {synthetic_data_category!r}"
        )
    if synthetic_data_category not in SyntheticDataCategory.values():
        # As the original's kernel (kernels/ipu_kernels.cc, IpuUseSyntheticDataForOp).
        raise errors.InvalidArgumentError(
            None, None, f"Invalid synthetic data category: {synthetic_data_category}"
        )
    return poplar_flags.is_synthetic(SyntheticDataCategory.Name(synthetic_data_category).lower())
