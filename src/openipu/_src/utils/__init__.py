"""General utilities (spec section 21.6): devices, seeds, variable placement, exports, flags."""

from openipu._src.utils.devices import get_num_of_ipus_in_device, running_on_ipu_model
from openipu._src.utils.export import export_dataset_to_file, export_inputs_to_file
from openipu._src.utils.exported_file import read_exported_file, read_exported_metadata
from openipu._src.utils.seeds import reset_ipu_seed
from openipu._src.utils.synthetic_data import SyntheticDataCategory, use_synthetic_data_for
from openipu._src.utils.variables import move_variable_initialization_to_cpu

__all__ = [
    "SyntheticDataCategory",
    "export_dataset_to_file",
    "export_inputs_to_file",
    "get_num_of_ipus_in_device",
    "move_variable_initialization_to_cpu",
    "read_exported_file",
    "read_exported_metadata",
    "reset_ipu_seed",
    "running_on_ipu_model",
    "use_synthetic_data_for",
]
