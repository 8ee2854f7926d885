"""Op lowerings, one family per module; importing this package registers them all."""

from openipu._src.popart.lowering.ops import (  # noqa: F401
    activation,
    ai_graphcore,
    ai_onnx_ml,
    cast,
    control_flow,
    conv,
    elementwise,
    indexing,
    logical,
    math,
    matmul,
    normalization,
    pool,
    quantization,
    random,
    reduction,
    rnn,
    sequence,
    shape,
    tensor_creation,
)
