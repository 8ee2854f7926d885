"""`popart.GraphTransformer`: edits of an ONNX model before a session loads it.

The edits are the original's (willow/src/graphtransformer_impl.cpp): element-type
conversions of constant tensors, initializers and declared types; initializers made
Constant nodes; unused inputs removed; BatchNormalization given its training outputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, ModelProto, TensorProto, helper, numpy_helper

from openipu._src.popart.builder.model_io import load_model, move_initializers_to_file
from openipu._src.popart.errors import popart_exception

_INT32 = np.iinfo(np.int32)
_TRAINING_OUTPUT_COUNTER = itertools.count()  # the original's static `counter`


def _set_typed_field(tensor: TensorProto, values: np.ndarray, data_type: int) -> None:
    """Store `values` in the typed repeated field of `data_type` (float_data, int32_data)."""
    for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
        tensor.ClearField(field)
    tensor.data_type = data_type
    if data_type == TensorProto.FLOAT:
        tensor.float_data.extend(values.astype(np.float32).reshape(-1).tolist())
    else:
        tensor.int32_data.extend(values.astype(np.int32).reshape(-1).tolist())


def _set_raw_half(tensor: TensorProto, values: np.ndarray) -> None:
    for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
        tensor.ClearField(field)
    tensor.data_type = TensorProto.FLOAT16
    tensor.raw_data = values.astype(np.float16).tobytes()


def _bfloat16_as_float(tensor: TensorProto) -> np.ndarray:
    # A bfloat16 is the top half of a float32's bits.
    bits = numpy_helper.to_array(tensor).view(np.uint16).astype(np.uint32) << 16
    return bits.view(np.float32)


class GraphTransformer:
    """`GraphTransformer(modelProtoOrFilename)`: serialized model bytes or an .onnx file."""

    def __init__(self, modelProtoOrFilename: Any) -> None:  # noqa: N803 - the original's name
        # The original checks the model's structure only (onnx's checker::check_model in
        # willow/src/graphtransformer_impl.cpp): its type_casting_test edits models whose
        # attributes shape inference refuses.
        self._model: ModelProto = load_model(modelProtoOrFilename, infer_shapes=False)

    def getModelProto(self) -> bytes:  # noqa: N802
        return self._model.SerializeToString()

    # -- element-type conversions ---------------------------------------------------------

    def _convert(
        self,
        method: str,
        source: int,
        target: int,
        convert_tensor: Callable[[TensorProto], None],
    ) -> None:
        graph = self._model.graph
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
                    raise popart_exception(
                        f"Attributes of type GRAPH and GRAPHS : need impl in {method}"
                    )
                if attribute.type == AttributeProto.TENSOR and attribute.t.data_type == source:
                    convert_tensor(attribute.t)
        for initializer in graph.initializer:
            if initializer.data_type == source:
                convert_tensor(initializer)
        # The original retypes the graph inputs and outputs; the value_info entries the
        # Builder adds for intermediate tensors are retyped too, or the model would contradict
        # itself.
        for value in (*graph.input, *graph.output, *graph.value_info):
            tensor_type = value.type.tensor_type
            if value.type.HasField("tensor_type") and tensor_type.elem_type == source:
                tensor_type.elem_type = target

    def _to_typed(self, method: str, source: int, target: int) -> None:
        def convert(tensor: TensorProto) -> None:
            _set_typed_field(tensor, numpy_helper.to_array(tensor), target)

        self._convert(method, source, target, convert)

    def convertFloatsToHalfs(self) -> None:  # noqa: N802
        def convert(tensor: TensorProto) -> None:
            _set_raw_half(tensor, numpy_helper.to_array(tensor))

        self._convert("convertFloatToHalf", TensorProto.FLOAT, TensorProto.FLOAT16, convert)

    def convertDoublesToHalfs(self) -> None:  # noqa: N802
        def convert(tensor: TensorProto) -> None:
            _set_raw_half(tensor, numpy_helper.to_array(tensor))

        self._convert("convertDoublesToHalfs", TensorProto.DOUBLE, TensorProto.FLOAT16, convert)

    def convertDoublesToFloats(self) -> None:  # noqa: N802
        self._to_typed("convertDoublesToFloats", TensorProto.DOUBLE, TensorProto.FLOAT)

    def convertUINT8ToINT32(self) -> None:  # noqa: N802
        self._to_typed("convertUINT8ToINT32", TensorProto.UINT8, TensorProto.INT32)

    def convertUINT16ToINT32(self) -> None:  # noqa: N802
        self._to_typed("convertUINT16ToINT32", TensorProto.UINT16, TensorProto.INT32)

    def convertINT8ToINT32(self) -> None:  # noqa: N802
        self._to_typed("convertINT8ToINT32", TensorProto.INT8, TensorProto.INT32)

    def convertINT16ToINT32(self) -> None:  # noqa: N802
        self._to_typed("convertINT16ToINT32", TensorProto.INT16, TensorProto.INT32)

    def convertINT64ToINT32(self, clip: bool = False) -> None:  # noqa: N802
        def convert(tensor: TensorProto) -> None:
            values = numpy_helper.to_array(tensor)
            if clip:
                values = np.clip(values, _INT32.min, _INT32.max)
            elif values.size and (values.max() > _INT32.max or values.min() < _INT32.min):
                raise popart_exception(
                    "In convertINT64TensorToINT32, cannot cast int64 to int32: number is too "
                    "large. If you are sure you want still want to convert your tensor data, "
                    "you can set 'clip' to 'true'."
                )
            _set_typed_field(tensor, values, TensorProto.INT32)

        self._convert("convertINT64ToINT32", TensorProto.INT64, TensorProto.INT32, convert)

    def convertBFloats16ToFloat32(self) -> None:  # noqa: N802
        def convert(tensor: TensorProto) -> None:
            _set_typed_field(tensor, _bfloat16_as_float(tensor), TensorProto.FLOAT)

        self._convert("convertBFloats16ToFloat32", TensorProto.BFLOAT16, TensorProto.FLOAT, convert)

    # -- structure --------------------------------------------------------------------------

    def convertInitializersToConstants(self, ids: list[str]) -> None:  # noqa: N802
        graph = self._model.graph
        initializers = {tensor.name: tensor for tensor in graph.initializer}
        for tensor_id in ids:
            if tensor_id not in initializers:
                raise popart_exception(f"TensorId {tensor_id} not in the model initalizers")
        # Constants go first, before any consumer.
        constants = [
            helper.make_node(
                "Constant", [], [tensor_id], name=tensor_id, value=initializers[tensor_id]
            )
            for tensor_id in ids
        ]
        nodes = [*constants, *graph.node]
        graph.ClearField("node")
        graph.node.extend(nodes)
        kept_initializers = [tensor for tensor in graph.initializer if tensor.name not in ids]
        kept_inputs = [value for value in graph.input if value.name not in ids]
        graph.ClearField("initializer")
        graph.initializer.extend(kept_initializers)
        graph.ClearField("input")
        graph.input.extend(kept_inputs)
        try:
            onnx.checker.check_model(self._model)
        except onnx.checker.ValidationError as error:
            raise popart_exception(str(error)) from None

    def convertAllFixedPointInitializersToConstants(self) -> None:  # noqa: N802
        fixed_point = {
            TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16,
            TensorProto.INT32, TensorProto.INT64, TensorProto.UINT32, TensorProto.UINT64,
        }  # fmt: skip
        self.convertInitializersToConstants(
            [
                tensor.name
                for tensor in self._model.graph.initializer
                if tensor.data_type in fixed_point
            ]
        )

    def removeUnusedInputs(self) -> None:  # noqa: N802
        """Drop graph inputs (and their initializers) that no node consumes."""
        graph = self._model.graph
        consumed = {name for node in graph.node for name in node.input}
        kept_inputs = [value for value in graph.input if value.name in consumed]
        kept_names = {value.name for value in kept_inputs}
        # Like the original, an initializer that is not a kept graph input goes too.
        kept_initializers = [tensor for tensor in graph.initializer if tensor.name in kept_names]
        if len(kept_inputs) == len(graph.input):
            return
        graph.ClearField("input")
        graph.input.extend(kept_inputs)
        graph.ClearField("initializer")
        graph.initializer.extend(kept_initializers)

    def prepareNodesForTraining(self) -> None:  # noqa: N802
        """Give every BatchNormalization its five (training) outputs."""
        for node in self._model.graph.node:
            if node.op_type != "BatchNormalization":
                continue
            for index in range(len(node.output), 5):
                counter = next(_TRAINING_OUTPUT_COUNTER)
                node.output.append(f"{node.op_type}_{node.name}_oi{index}_{counter}")

    def saveInitializersExternally(self, ids: list[str], filename: str) -> None:  # noqa: N802
        move_initializers_to_file(self._model.graph.initializer, list(ids), filename)
