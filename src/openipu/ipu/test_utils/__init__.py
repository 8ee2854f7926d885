"""`tensorflow.python.ipu.test_utils`: the original's test helpers (re-exports only).

The helpers that read Poplar's report files raise a clear error (see
`openipu._src.test_utils.report_files`).
"""

from openipu._src.test_utils.dataset_utils import (
    create_dual_increasing_dataset,
    create_multi_increasing_dataset,
    create_single_increasing_dataset,
)
from openipu._src.test_utils.hardware_test_utils import (
    add_hw_ci_connection_options,
    get_ci_num_ipus,
    has_ci_ipus,
    skip_if_not_enough_ipus,
    skip_on_hw,
    skip_with_asan,
    test_may_use_ipus_or_model,
    test_uses_ipus,
)
from openipu._src.test_utils.report_files import (
    ReportHelper,
    ReportJSON,
    TensorMap,
    TestCaseExtensions,
    enable_ipu_events,
    extract_all_events,
    extract_all_strings_from_event_trace,
    extract_all_types_from_event_trace,
    missing_whitelist_entries_in_names,
)
from openipu._src.test_utils.session_utils import ipu_session, move_variable_initialization_to_cpu

__all__ = [
    "ReportHelper",
    "ReportJSON",
    "TensorMap",
    "TestCaseExtensions",
    "add_hw_ci_connection_options",
    "create_dual_increasing_dataset",
    "create_multi_increasing_dataset",
    "create_single_increasing_dataset",
    "enable_ipu_events",
    "extract_all_events",
    "extract_all_strings_from_event_trace",
    "extract_all_types_from_event_trace",
    "get_ci_num_ipus",
    "has_ci_ipus",
    "ipu_session",
    "missing_whitelist_entries_in_names",
    "move_variable_initialization_to_cpu",
    "skip_if_not_enough_ipus",
    "skip_on_hw",
    "skip_with_asan",
    "test_may_use_ipus_or_model",
    "test_uses_ipus",
]
