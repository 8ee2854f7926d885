"""`tensorflow.python.ipu.utils`: general utilities."""

from openipu._src.config.ipu_config import IPUConfig
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

__all__ = [
    "IPUConfig",
    "SyntheticDataCategory",
    "export_dataset_to_file",
    "export_inputs_to_file",
    "get_num_of_ipus_in_device",
    "move_variable_initialization_to_cpu",
    "reset_ipu_seed",
    "running_on_ipu_model",
    "use_synthetic_data_for",
]
