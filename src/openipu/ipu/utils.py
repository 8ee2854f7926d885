"""`tensorflow.python.ipu.utils`: general utilities.

The original's utils module also re-exports the configuration API of
`ipu.config` (tensorflow/python/ipu/utils.py), which programs import from here.
"""

from openipu._src.config.enums import (
    DeviceConnectionType,
    ExecutionProfileType,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
)
from openipu._src.config.ipu_config import IPUConfig
from openipu._src.system.configure import configure_ipu_system, get_ipu_config
from openipu._src.utils import (
    SyntheticDataCategory,
    export_dataset_to_file,
    export_inputs_to_file,
    get_num_of_ipus_in_device,
    move_variable_initialization_to_cpu,
    reset_ipu_seed,
    running_on_ipu_model,
    use_synthetic_data_for,
)
from openipu._src.utils.weights_extractor import (
    export_variables_from_live_model,
    export_variables_from_live_session,
    import_data_in_live_model,
    import_data_in_live_session,
)

__all__ = [
    "DeviceConnectionType",
    "ExecutionProfileType",
    "IPUConfig",
    "MergeRemoteBuffersBehaviour",
    "SchedulingAlgorithm",
    "SelectionOrder",
    "SyntheticDataCategory",
    "configure_ipu_system",
    "export_dataset_to_file",
    "export_inputs_to_file",
    "export_variables_from_live_model",
    "export_variables_from_live_session",
    "get_num_of_ipus_in_device",
    "get_ipu_config",
    "import_data_in_live_model",
    "import_data_in_live_session",
    "move_variable_initialization_to_cpu",
    "reset_ipu_seed",
    "running_on_ipu_model",
    "use_synthetic_data_for",
]
