"""Names under which the builder stores IPU annotations in the ONNX model.

Node attributes use the original PopART names so that models round-trip with
it. Readers (the ONNX -> TensorFlow lowering, sessions) should import these
constants rather than spell the strings again.
"""

from __future__ import annotations

# ONNX node attributes, set by the builder's annotation methods and contexts.
VIRTUAL_GRAPH = "__ipu_number"  # int: the IPU (virtual graph) of the node
PIPELINE_STAGE = "__pipeline_stage"  # int
EXECUTION_PHASE = "__execution_phase"  # int
RECOMPUTE_OUTPUT = "__recompute_output_in_backward_pass"  # int RecomputeType
SCHEDULE_PRIORITY = "__schedule_priority"  # float
PARTIALS_TYPE = "__partials_type"  # "FLOAT" or "HALF"
AVAILABLE_MEMORY_PROPORTION = "__available_memory_proportion"  # float in [0, 1)
ENABLE_CONV_DITHERING = "__enable_conv_dithering"  # int 0/1
SERIALIZE_MATMUL_MODE = "__serialize_matmul_mode"  # str, see SERIALIZE_MATMUL_MODES
SERIALIZE_MATMUL_FACTOR = "__serialize_matmul_factor"  # int
SERIALIZE_MATMUL_PRECISION = "__serialize_matmul_precision"  # int 0/1 (keep_precision)
OUTPUT_TENSOR_LOCATION = "__output_tensor_location"  # ints, see encode_tensor_location
EXCLUDE_PATTERNS = "__exclude_patterns"  # strings: pattern names
OUTLINE = "__outline"  # strings: key0, value0, key1, value1, ...
INPLACE_OP_NAMES = "__inplace_op_names"  # strings: inplace variant names
INPLACE_OP_PRIORITIES = "__inplace_op_priorities"  # floats, one per name
COLLECTIVE_OPERATOR = "__collectiveOperator"  # int CollectiveOperator
COLLECTIVE_COMM_GROUP = "__collectiveCommGroup"  # ints [CommGroupType, replica group size]

SERIALIZE_MATMUL_MODES = ("input_channels", "output_channels", "reducing_dim", "none")

# ModelProto.metadata_props keys.
REPLICATION_FACTOR = "__replication_factor"  # str(int); absent means 1
# Per-tensor settings: the key is the prefix followed by the tensor id, the value JSON.
INPUT_SETTINGS_PREFIX = (
    "__input_settings:"  # {"tileSet", "exchangeStrategy", "replicatedStreamMode"}
)
VARIABLE_SETTINGS_PREFIX = (
    "__variable_settings:"  # {"commGroupType", "replicaGroupSize", "retrievalMode"}
)
