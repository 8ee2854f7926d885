"""`tensorflow.python.ipu.config`: configuring the (emulated) IPU system."""

from openipu._src.config.attribute_metadata import AttributeMetadata
from openipu._src.config.enums import (
    DeviceConnectionType,
    ExecutionProfileType,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.system.configure import (
    configure_ipu_system,
    get_ipu_config,
    reset_ipu_configuration,
)

__all__ = [
    "AttributeMetadata",
    "DeviceConnectionType",
    "ExecutionProfileType",
    "IPUConfig",
    "MergeRemoteBuffersBehaviour",
    "SchedulingAlgorithm",
    "SelectionOrder",
    "StochasticRoundingBehaviour",
    "configure_ipu_system",
    "get_ipu_config",
    "reset_ipu_configuration",
]
