"""PopART on emulated IPUs: the public `popart` package (re-exports only).

Imports are grouped by area, one comment header each; add new areas the same way.
"""
# ruff: noqa: F401 - every import here is a re-export

# -- Errors -------------------------------------------------------------------------------
from openipu._src.popart.errors import popart_exception

# isort: split
# -- Tensors ------------------------------------------------------------------------------
from openipu._src.popart.builder import tensor_info as tensorinfo
from openipu._src.popart.builder.tensor_info import DataType, TensorInfo

# isort: split
# -- Builder ------------------------------------------------------------------------------
from openipu._src.popart import builder
from openipu._src.popart.builder import (
    AiGraphcoreOpset1,
    AiOnnxMlOpset1,
    AiOnnxOpset6,
    AiOnnxOpset7,
    AiOnnxOpset8,
    AiOnnxOpset9,
    AiOnnxOpset10,
    AiOnnxOpset11,
    Builder,
)
from openipu._src.popart.builder.model_context import (
    defaultAiGraphcoreOpset,
    defaultAiOnnxMlOpset,
    defaultAiOnnxOpset,
)

# isort: split
# -- Builder enums ------------------------------------------------------------------------
from openipu._src.popart.builder.enums import (
    CollectiveOperator,
    CommGroupType,
    InitType,
    RecomputeType,
    ReductionType,
    ScatterReduction,
    TensorRemapType,
)
