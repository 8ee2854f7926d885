"""Which inference models may run on onnxruntime, and the model it runs.

An inference session may run its batches on onnxruntime's CPU kernels instead of its
TensorFlow lowering, when that is faster (the engine measures: `engine/onnx_runtime_program`).
Only models whose every op means the same in PopART and onnxruntime qualify: standard ONNX
ops of the list below, on float, integer and bool tensors, without random ops (PopART
seeds them per batch and replica), without the ops whose out-of-range or NaN rules PopART
documents differently (Gather, Scatter, ArgMax, ...), in sessions that change nothing per
IPU (no synthetic data, sharding, pipelining or floating-point checks).

The model onnxruntime runs is the session's: its weights become constants (the values on
the device), its inputs take the session's shapes, and its outputs are the anchors.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from openipu._src.popart.builder.builder_debug_info import strip_internal_attributes
from openipu._src.popart.session.anchors import AnchorPlan
from openipu._src.popart.session.stepio import InputPlan
from openipu._src.popart.session.tensor_types import TensorSignature

#: Standard ONNX ops whose results onnxruntime computes as PopART does (no PopART-specific
#: rule for out-of-range indices, NaN or rounding applies to them).
SAME_MEANING_OPS = frozenset(
    {
        "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat",
        "Constant", "Conv", "Cos", "Div", "Dropout", "Einsum", "Elu", "Erf", "Exp", "Expand",
        "Flatten", "Floor", "Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid",
        "Identity", "InstanceNormalization", "LayerNormalization", "LeakyRelu", "Log",
        "LogSoftmax", "MatMul", "MaxPool", "Mul", "Neg", "Pad", "Pow", "PRelu", "Reciprocal",
        "ReduceL2", "ReduceMean", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape", "Selu",
        "Sigmoid", "Sin", "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt",
        "Squeeze", "Sub", "Sum", "Tanh", "Tile", "Transpose", "Unsqueeze",
    }
)  # fmt: skip

_STANDARD_DOMAINS = ("", "ai.onnx")
_ONNX_RUNTIME_TYPES = frozenset(
    np.dtype(t) for t in (np.float32, np.float16, np.float64, np.int32, np.int64, np.bool_)
)


def qualifies(model: onnx.ModelProto, inputs: list[InputPlan], anchors: list[AnchorPlan]) -> bool:
    """Whether onnxruntime computes this model's anchors as PopART does."""
    graph = model.graph
    if any(
        node.domain not in _STANDARD_DOMAINS or node.op_type not in SAME_MEANING_OPS
        for node in graph.node
    ):
        return False
    if any(
        attribute.g.node or attribute.graphs for node in graph.node for attribute in node.attribute
    ):
        return False  # subgraphs
    computed = {name for node in graph.node for name in node.output}
    signatures = [plan.signature for plan in inputs] + [plan.signature for plan in anchors]
    if any(not _runs_on_onnx_runtime(signature) for signature in signatures):
        return False
    # Anchors are computed tensors (an input or a weight anchored is not the model's output).
    return bool(anchors) and all(plan.tensor_id in computed for plan in anchors)


def _runs_on_onnx_runtime(signature: TensorSignature) -> bool:
    if signature.is_string or signature.transfer_dtype != signature.dtype:
        return False
    return np.dtype(signature.numpy_dtype) in _ONNX_RUNTIME_TYPES


def runnable_model(
    model: onnx.ModelProto,
    weights: dict[str, np.ndarray],
    inputs: list[InputPlan],
    anchors: list[AnchorPlan],
) -> bytes:
    """The model onnxruntime runs: weights as constants, the session's inputs and anchors."""
    runnable = onnx.ModelProto()
    runnable.CopyFrom(model)
    graph = runnable.graph
    strip_internal_attributes(graph)
    initializers = {tensor.name for tensor in graph.initializer}
    for index, tensor in enumerate(graph.initializer):
        if tensor.name in weights:
            value = np.asarray(weights[tensor.name]).reshape(tuple(tensor.dims))
            graph.initializer[index].CopyFrom(numpy_helper.from_array(value, tensor.name))
    graph_inputs = [
        helper.make_tensor_value_info(
            plan.tensor_id,
            helper.np_dtype_to_tensor_dtype(np.dtype(plan.signature.numpy_dtype)),
            list(plan.signature.shape),
        )
        for plan in inputs
        if plan.tensor_id not in initializers
    ]
    del graph.input[:]
    graph.input.extend(graph_inputs)
    del graph.output[:]
    graph.output.extend(
        helper.make_tensor_value_info(
            plan.tensor_id,
            helper.np_dtype_to_tensor_dtype(np.dtype(plan.signature.numpy_dtype)),
            list(plan.signature.shape),
        )
        for plan in anchors
    )
    # Only the standard domains' opsets: onnxruntime needs no other (no node uses them).
    standard = [entry for entry in runnable.opset_import if entry.domain in _STANDARD_DOMAINS]
    del runnable.opset_import[:]
    runnable.opset_import.extend(standard)
    serialized: bytes = runnable.SerializeToString()
    return serialized


def with_free_batch(runnable: bytes) -> bytes | None:
    """`runnable` with the leading dimension of every input and output made free (symbolic),
    when they all share one (the batch), so that several batches run as one; None otherwise.

    Whether each sample is still computed on its own (no op mixes the batch, no shape
    fixes it) is for the caller to check, on trial inputs, against the per-batch model.
    """
    model = onnx.load_model_from_string(runnable)
    values = list(model.graph.input) + list(model.graph.output)
    leading = set()
    for value in values:
        dims = value.type.tensor_type.shape.dim
        if not dims or not dims[0].HasField("dim_value"):
            return None
        leading.add(dims[0].dim_value)
    if len(leading) != 1 or leading == {1}:
        return None
    for value in values:
        dim = value.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = "batches"
    del model.graph.value_info[:]  # intermediate shapes with the old batch: re-inferred
    serialized: bytes = model.SerializeToString()
    return serialized
