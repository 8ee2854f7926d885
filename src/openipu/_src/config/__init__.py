"""`IPUConfig`, its enums and metadata (spec section 21.7); no TensorFlow needed."""

from openipu._src.config.attribute_metadata import AttributeMetadata
from openipu._src.config.config_tree import UnknownAttributeError
from openipu._src.config.enums import (
    DeviceConnectionType,
    ExecutionProfileType,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.config.selection_order import ipu_order

__all__ = [
    "AttributeMetadata",
    "DeviceConnectionType",
    "ExecutionProfileType",
    "IPUConfig",
    "MergeRemoteBuffersBehaviour",
    "SchedulingAlgorithm",
    "SelectionOrder",
    "StochasticRoundingBehaviour",
    "UnknownAttributeError",
    "ipu_order",
]
