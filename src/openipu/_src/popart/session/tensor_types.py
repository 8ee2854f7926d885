"""Data types and shapes of a session's tensors: its inputs, its anchors, any tensor by id.

PopART compiles for static shapes, so every input needs a full shape, from the model or from
`InputShapeInfo`. Other tensors get theirs from shape inference (ONNX's and the builder's
ai.graphcore rules) on the model with those input shapes, and, where inference cannot tell,
from tracing the lowered graph (which is what the session will compute).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np
import onnx
import tensorflow as tf

from openipu._src.popart.builder.shape_inference import infer_types
from openipu._src.popart.builder.shape_types import known_types
from openipu._src.popart.builder.tensor_info import (
    TensorInfo,
    data_type_of_onnx_type,
    onnx_type_of,
)
from openipu._src.popart.errors import TensorInfoError, popart_exception
from openipu._src.popart.input_shape_info import InputShapeInfo
from openipu._src.popart.lowering import LoweredGraph
from openipu._src.popart.lowering.dtypes import ONNX_TO_TF, TF_TO_ONNX, is_narrow
from openipu._src.popart.lowering.ops.collectives import replicas_for_shapes
from openipu._src.popart.session.popart_retyped import retyped_tensors


def _is_full(shape: tuple[int | None, ...]) -> TypeGuard[tuple[int, ...]]:
    """Whether every dimension of the shape is known (a negative one is not a size)."""
    return all(d is not None and d >= 0 for d in shape)


def _unknown_dimension_message(name: str, declared: onnx.ValueInfoProto | None) -> str | None:
    """The original's refusal of an input declared with a symbolic or negative dimension
    (willow/src/ir.cpp, checkForDimParams), or None if its declaration has neither."""
    if declared is None or declared.type.WhichOneof("value") != "tensor_type":
        return None
    dims = declared.type.tensor_type.shape.dim
    shown = [d.dim_param if d.HasField("dim_param") else str(d.dim_value) for d in dims]
    for dim, text in zip(dims, shown, strict=True):
        if dim.HasField("dim_param") or dim.dim_value < 0:
            return (
                f"Input tensor '{name}' must be specified in InputShapeInfo, as it has shape "
                f"[{', '.join(shown)}], which uses an unknown value '{text}'."
            )
    return None


@dataclass(frozen=True)
class TensorSignature:
    """A tensor's element type and full static shape, for any type TensorFlow can hold.

    PopART's `TensorInfo` knows only PopART's data types; sessions also carry the other ONNX
    types (float8 variants, 4-bit integers) that the lowering supports.
    """

    dtype: tf.DType
    shape: tuple[int, ...]

    @property
    def nelms(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def numpy_dtype(self) -> np.dtype:
        """How the host holds it (object arrays for strings)."""
        return np.dtype(object) if self.dtype == tf.string else np.dtype(self.dtype.as_numpy_dtype)

    @property
    def is_string(self) -> bool:
        return bool(self.dtype == tf.string)

    @property
    def transfer_dtype(self) -> tf.DType:
        """The type that carries it to the host: float8/float4 and 2- or 4-bit integers travel
        as float32, int8 or uint8 (exactly), as TensorFlow's host queues cannot hold them."""
        if not is_narrow(self.dtype):
            return self.dtype
        if self.dtype.is_floating:
            return tf.float32
        return tf.uint8 if self.dtype.is_unsigned else tf.int8

    def tensor_info(self) -> TensorInfo:
        try:
            data_type = data_type_of_onnx_type(TF_TO_ONNX[self.dtype])
        except (KeyError, TensorInfoError):
            raise popart_exception(
                f"A tensor of type {self.dtype.name} has no PopART TensorInfo (PopART has no "
                "such data type)"
            ) from None
        return TensorInfo(data_type, list(self.shape))

    def __str__(self) -> str:
        return f"{self.dtype.name} {list(self.shape)}"


def signature_of(info: TensorInfo) -> TensorSignature:
    try:
        dtype = ONNX_TO_TF[onnx_type_of(info.dataType())]
    except KeyError:
        raise popart_exception(f"Data type {info.data_type()} has no TensorFlow type") from None
    return TensorSignature(dtype, tuple(info.shape()))


def input_signatures(
    lowered: LoweredGraph, shape_info: InputShapeInfo, graph: onnx.GraphProto
) -> dict[str, TensorSignature]:
    """The full signature of every streamed input (InputShapeInfo's, or the model's)."""
    declared = {value.name: value for value in graph.input}
    signatures = {}
    for spec in lowered.inputs:
        if shape_info.has(spec.name):
            signatures[spec.name] = signature_of(shape_info.get(spec.name))
            continue
        if spec.kind != "tensor":
            raise popart_exception(
                f"Input '{spec.name}' is a {spec.kind}: sessions stream tensors only"
            )
        message = _unknown_dimension_message(spec.name, declared.get(spec.name))
        if message is not None:
            raise popart_exception(message)
        if spec.dtype is None or spec.shape is None or not _is_full(spec.shape):
            shape = "unknown" if spec.shape is None else [d or "?" for d in spec.shape]
            raise popart_exception(
                f"Input '{spec.name}' has no full shape and type in the model (shape {shape}): "
                "give them with InputShapeInfo.add(id, TensorInfo(dtype, shape))"
            )
        signatures[spec.name] = TensorSignature(spec.dtype, tuple(spec.shape))
    return signatures


class TensorTypes:
    """Signatures of the tensors of a model whose inputs have full signatures (found once)."""

    def __init__(
        self,
        model: onnx.ModelProto,
        lowered: LoweredGraph,
        inputs: dict[str, TensorSignature],
        replicas: int = 1,
    ) -> None:
        self._model = model
        self._replicas = replicas
        self._lowered = lowered
        self._inputs = inputs
        # What ONNX inference gives: an element type, and a shape where it knows one.
        self._inference: dict[str, tuple[tf.DType, tuple[int | None, ...] | None]] | None = None
        self._inferred: dict[str, TensorSignature] | None = None
        self._traced: dict[str, TensorSignature] = {}
        # Typed by the lowering (as PopART's IR types them), never by the model.
        self._retyped = retyped_tensors(model.graph)

    def get(self, tensor_id: str) -> TensorSignature:
        """The signature of one tensor, or a popart_exception when it has no static one."""
        return self.resolve([tensor_id])[tensor_id]

    def dtype(self, tensor_id: str) -> tf.DType:
        """The element type of one tensor: from the model or ONNX inference where they give
        it (whatever they know of its shape), else from the traced graph as `get`."""
        known = self._declared().get(tensor_id)
        if known is not None and tensor_id not in self._retyped:
            return known.dtype
        inferred = self._inferred_types().get(tensor_id)
        if inferred is not None:
            return inferred[0]
        return self.get(tensor_id).dtype

    def resolve(self, tensor_ids: Iterable[str]) -> dict[str, TensorSignature]:
        tensor_ids = list(tensor_ids)
        known = {
            name: signature
            for name, signature in self._declared().items()
            if name not in self._retyped
        }
        known.update(self._traced)
        missing = [name for name in tensor_ids if name not in known]
        if missing:
            known.update(self.inferred())
            missing = [name for name in tensor_ids if name not in known]
        if missing:
            self._traced.update(self._trace(missing))
            known.update(self._traced)
        return {name: known[name] for name in tensor_ids}

    def _declared(self) -> dict[str, TensorSignature]:
        """Inputs, initializers and fully declared graph outputs: no inference needed."""
        declared = dict(self._inputs)
        for name, array in self._lowered.initializers.items():
            declared[name] = TensorSignature(_tf_dtype_of_array(array), array.shape)
        for spec in self._lowered.outputs:
            if spec.kind == "tensor" and spec.dtype is not None and spec.shape is not None:
                if _is_full(spec.shape):
                    declared.setdefault(spec.name, TensorSignature(spec.dtype, spec.shape))
        return declared

    def inferred(self) -> dict[str, TensorSignature]:
        """The signatures ONNX inference gives in full (element type and every dimension)."""
        if self._inferred is None:
            self._inferred = {
                name: TensorSignature(dtype, shape)
                for name, (dtype, shape) in self._inferred_types().items()
                if shape is not None and _is_full(shape)
            }
        return self._inferred

    def _inferred_types(self) -> dict[str, tuple[tf.DType, tuple[int | None, ...] | None]]:
        if self._inference is None:
            self._inference = self._infer()
        return self._inference

    def _infer(self) -> dict[str, tuple[tf.DType, tuple[int | None, ...] | None]]:
        model = onnx.ModelProto()
        model.CopyFrom(self._model)
        for value in model.graph.input:
            signature = self._inputs.get(value.name)
            if signature is not None:
                value.type.CopyFrom(
                    onnx.helper.make_tensor_type_proto(
                        TF_TO_ONNX[signature.dtype], list(signature.shape)
                    )
                )
        try:
            types = known_types(infer_types(model).graph)
        except popart_exception:
            return {}  # inference failed; tracing will tell
        return {
            name: (ONNX_TO_TF[tensor_type.elem_type], tensor_type.shape)
            for name, tensor_type in types.items()
            if name not in self._retyped and tensor_type.elem_type in ONNX_TO_TF
        }

    def _trace(self, tensor_ids: list[str]) -> dict[str, TensorSignature]:
        specs = {
            name: tf.TensorSpec(signature.shape, signature.dtype)
            for name, signature in self._inputs.items()
        }
        outputs = set(self._lowered.output_names)
        fetch = [name for name in tensor_ids if name not in outputs]

        def evaluate(inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
            results = self._lowered.run(inputs, fetch=fetch)
            return {name: results[name] for name in tensor_ids}

        try:
            # One replica's graph: its collectives' shapes depend on the replica count.
            with replicas_for_shapes(self._replicas):
                traced = tf.function(evaluate, autograph=False).get_concrete_function(specs)
        except popart_exception:
            raise
        except Exception as error:  # noqa: BLE001 - any failure to build the graph is the model's
            raise popart_exception(
                f"Cannot work out the shapes of {tensor_ids}: building the graph failed: "
                f"{type(error).__name__}: {error}"
            ) from None
        signatures = {}
        for name, value in traced.structured_outputs.items():
            if not isinstance(value, tf.Tensor):
                raise popart_exception(
                    f"Tensor '{name}' is a {type(value).__name__}, not a tensor: sessions "
                    "return tensors only"
                )
            if not value.shape.is_fully_defined():
                raise popart_exception(
                    f"Tensor '{name}' has shape {value.shape}, known only at run time: PopART "
                    "compiles for static shapes"
                )
            signatures[name] = TensorSignature(value.dtype, tuple(value.shape.as_list()))
        return signatures


def _tf_dtype_of_array(array: np.ndarray) -> tf.DType:
    return tf.string if array.dtype.kind in "OUS" else tf.as_dtype(array.dtype)
